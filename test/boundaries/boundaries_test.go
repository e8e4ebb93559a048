/*
Copyright 2026 The Knative Authors

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package boundaries holds the test that keeps the module's rooms apart:
// each binary links only its own side, and the shared layers import
// neither side (docs/architecture.md, "Boundaries").
package boundaries

import (
	"os/exec"
	"strings"
	"testing"

	"knative.dev/pkg/depcheck"
)

const module = "knative.dev/event-forwarding-proxy"

// Third-party packages one side must not link: any use of the CloudEvents
// SDK goes through its event package, and go-oidc's verifier lives in oidc.
const (
	cloudEventsSDK = "github.com/cloudevents/sdk-go/v2/event"
	oidcVerifier   = "github.com/coreos/go-oidc/v3/oidc"
	kubeClient     = "k8s.io/client-go/rest"
)

func TestBoundaries(t *testing.T) {
	sourceSide, inbound := packagesUnder(t, "adapter"), packagesUnder(t, "proxy")
	rules := []struct {
		name   string
		pkgs   []string // whose transitive imports are checked
		banned []string
	}{{
		name:   "the proxy links no CloudEvents SDK and nothing of the source side",
		pkgs:   []string{module + "/cmd/proxy"},
		banned: append([]string{cloudEventsSDK}, sourceSide...),
	}, {
		name:   "the PingSource adapter links nothing of the proxy and no OIDC verifier",
		pkgs:   []string{module + "/cmd/mtping"},
		banned: append([]string{oidcVerifier}, inbound...),
	}, {
		name:   "delivery imports neither the proxy nor the source side",
		pkgs:   packagesUnder(t, "delivery"),
		banned: append(append([]string{}, inbound...), sourceSide...),
	}, {
		// What the fuzz targets instrument is what they link: kept small.
		name:   "the handler chain and the transports link no Kubernetes client (proxy/kube, proxy/process and delivery/trustbundles do)",
		pkgs:   hotPath(t),
		banned: []string{kubeClient},
	}, {
		name:   "no binary links the raw HTTP/2 test client",
		pkgs:   packagesUnder(t, "cmd"),
		banned: []string{module + "/internal/h2raw"},
	}, {
		name:   "config imports neither side nor delivery",
		pkgs:   packagesUnder(t, "config"),
		banned: append(append(append([]string{}, inbound...), sourceSide...), packagesUnder(t, "delivery")...),
	}}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			for _, p := range r.pkgs {
				if err := depcheck.CheckNoDependency(p, r.banned); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// hotPath is every package of proxy and delivery but the two that reach
// the Kubernetes API.
func hotPath(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	for _, p := range append(packagesUnder(t, "proxy"), packagesUnder(t, "delivery")...) {
		if p != module+"/proxy/kube" && p != module+"/proxy/process" && p != module+"/delivery/trustbundles" {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// packagesUnder lists the module's packages in dir and below it, tests'
// own packages left out.
func packagesUnder(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", module+"/"+dir+"/...").Output()
	if err != nil {
		t.Fatalf("go list %s/...: %v", dir, err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 {
		t.Fatalf("go list %s/... found no package", dir)
	}
	return pkgs
}
