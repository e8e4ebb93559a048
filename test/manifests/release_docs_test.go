//go:build integration

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

package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The release's checks of docs/install.md: the blocks the cluster runs,
// the files they name, and the switch to the sync profile.

// installBlocks are the blocks of docs/install.md the cluster's tests run
// (test/cluster/docblock.sh).
var installBlocks = []string{"load-images", "install", "install-async-kpa", "check-destination", "check-event", "operator-install", "forwarding", "rollback", "operator-rollback", "uninstall"}

// checkInstallDoc checks docs/install.md holds each tested block, names
// only files the release holds, and never deletes with -f.
func checkInstallDoc(t *testing.T, out string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, name := range installBlocks {
		if !strings.Contains(doc, "<!-- test: "+name+" -->\n```sh\n") {
			t.Errorf("docs/install.md has no shell block marked %q", name)
		}
	}
	for _, m := range regexp.MustCompile("release/([A-Za-z0-9._/-]+[A-Za-z0-9])").FindAllStringSubmatch(doc, -1) {
		if _, err := os.Stat(filepath.Join(out, m[1])); err != nil {
			t.Errorf("docs/install.md names release/%s, which the release does not hold", m[1])
		}
	}
	if strings.Contains(doc, "kubectl delete -f release") {
		t.Error("docs/install.md deletes with the release YAML: the uninstall goes by name and label, after the way back")
	}
}

// kubectlNames are the names kubectl delete takes for kinds whose lower
// case is not the short one docs/install.md writes.
var kubectlNames = map[string]string{"HorizontalPodAutoscaler": "hpa", "PodDisruptionBudget": "pdb"}

// checkSwitchToSync checks that docs/install.md's switch to the sync
// profile deletes every object the default (async) profile holds and
// the sync one does not: applying the sync YAML leaves them in place.
func checkSwitchToSync(t *testing.T, out string) {
	t.Helper()
	objects := func(profile string) map[string]Document {
		file := "event-forwarding-proxy-" + profile + ".yaml"
		docs, err := readFile(filepath.Join(out, file), file)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Document{}
		for _, d := range docs {
			m[objectKey(d)] = d
		}
		return m
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- test: switch-to-sync -->\n```sh\n")
	if !ok {
		t.Fatal("docs/install.md has no shell block marked switch-to-sync")
	}
	block, _, _ := strings.Cut(rest, "```")
	if !strings.Contains(block, "kubectl apply -f release/event-forwarding-proxy-sync.yaml") {
		t.Errorf("the switch to sync does not apply the sync profile:\n%s", block)
	}
	sync := objects("sync")
	only := 0
	for key, d := range objects("async") {
		if _, ok := sync[key]; ok {
			continue
		}
		only++
		kind := kubectlNames[d.GVK.Kind]
		if kind == "" {
			kind = strings.ToLower(d.GVK.Kind)
		}
		if del := fmt.Sprintf("kubectl -n %s delete %s %s", d.Namespace, kind, d.Name); !strings.Contains(block, del) {
			t.Errorf("the switch to sync leaves %s behind: no %q in\n%s", key, del, block)
		}
	}
	if only == 0 {
		t.Error("the async profile holds nothing the sync one does not: the check checks nothing")
	}
}
