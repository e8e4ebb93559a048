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

package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestStart checks one server (each start takes seconds) from several
// sides.
func TestStart(t *testing.T) {
	s := Start(t)
	t.Run("clients", func(t *testing.T) { testClients(t, s) })
	t.Run("Knative CRDs served", func(t *testing.T) { testKnativeCRDs(t, s) })
	t.Run("service-account tokens", func(t *testing.T) { testServiceAccountTokens(t, s) })
}

func testClients(t *testing.T, s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	fromFile, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  *rest.Config
	}{
		{name: "rest.Config", cfg: s.Config},
		{name: "kubeconfig file", cfg: fromFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := kubernetes.NewForConfigOrDie(tc.cfg)
			v, err := client.Discovery().ServerVersion()
			if err != nil {
				t.Fatal(err)
			}
			if v.GitVersion != "v1.37.2" || v.Major != "1" || v.Minor != "37" {
				t.Errorf("version = %+v, want v1.37.2", v)
			}
			// The admin may do anything (system:masters), under RBAC.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "admin-"}}
			if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				t.Errorf("creating a namespace: %v", err)
			}
		})
	}
	if s.URL != s.Issuer || !strings.HasPrefix(s.URL, "https://127.0.0.1:") {
		t.Errorf("URL %q, issuer %q: want both https://127.0.0.1:<port>", s.URL, s.Issuer)
	}
}

func testKnativeCRDs(t *testing.T, s *Server) {
	client := kubernetes.NewForConfigOrDie(s.Config)
	tests := []struct {
		name         string
		groupVersion string
		resource     string
	}{
		{name: "PingSource", groupVersion: "sources.knative.dev/v1", resource: "pingsources"},
		{name: "Trigger", groupVersion: "eventing.knative.dev/v1", resource: "triggers"},
		{name: "Knative Service", groupVersion: "serving.knative.dev/v1", resource: "services"},
		{name: "Revision", groupVersion: "serving.knative.dev/v1", resource: "revisions"},
		{name: "PodAutoscaler", groupVersion: "autoscaling.internal.knative.dev/v1alpha1", resource: "podautoscalers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := client.Discovery().ServerResourcesForGroupVersion(tc.groupVersion)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list.APIResources {
				if r.Name == tc.resource {
					return
				}
			}
			t.Errorf("%s not served in %s", tc.resource, tc.groupVersion)
		})
	}
}

// testServiceAccountTokens checks what OIDC tests rely on: the API server
// issues tokens for any audience, and its discovery names its Issuer.
func testServiceAccountTokens(t *testing.T, s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(s.Config)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "caller", Namespace: "default"}}
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "caller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"event-forwarding-proxy"}, ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status.Token == "" {
		t.Fatal("empty token")
	}

	raw, err := client.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(raw, &discovery); err != nil {
		t.Fatal(err)
	}
	if discovery.Issuer != s.Issuer || discovery.JWKSURI != s.Issuer+"/openid/v1/jwks" {
		t.Errorf("discovery = %+v, want issuer %s", discovery, s.Issuer)
	}
}

func TestMissingBinariesSayHowToBuildThem(t *testing.T) {
	t.Setenv(toolsEnv, t.TempDir())
	_, err := binaries()
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("error = %v, want one that says to run `make tools`", err)
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "apiserver")); err != nil {
		t.Errorf("root %s does not hold test/apiserver: %v", root, err)
	}
}

// TestStartReportsAProcessThatExits checks the error Start retries on, with
// stand-in binaries that fail at once.
func TestStartReportsAProcessThatExits(t *testing.T) {
	tests := []struct {
		name     string
		etcd     string // shell script bodies
		wantName string
		wantLog  string
	}{
		{name: "etcd", etcd: "echo etcd says no >&2; exit 3", wantName: "etcd", wantLog: "etcd says no"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bins := toolBinaries{apiserver: filepath.Join(dir, "kube-apiserver"), etcd: filepath.Join(dir, "etcd")}
			for path, body := range map[string]string{bins.etcd: tc.etcd, bins.apiserver: "exit 1"} {
				if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := start(bins, t.TempDir())
			var exit *exitError
			if !errors.As(err, &exit) {
				t.Fatalf("error = %v, want an exitError", err)
			}
			if exit.name != tc.wantName || !strings.Contains(exit.log, tc.wantLog) {
				t.Errorf("exitError = %+v, want %s with %q in its log", exit, tc.wantName, tc.wantLog)
			}
		})
	}
}
