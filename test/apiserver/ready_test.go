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
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// kube-apiserver creates its serving certificate's file before it writes
// it: a poll that reads it empty or cut short must not keep that reading,
// or the server is never seen ready.
func TestReadyTrustingReadsTheServingCertificateAgain(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	admin, err := newPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	servingCert := filepath.Join(dir, "apiserver.crt")

	for _, step := range []struct {
		name    string
		content []byte // nil: no file yet
		ready   bool
	}{
		{"no file yet", nil, false},
		{"created, not written", []byte{}, false},
		{"cut short", certPEM[:len(certPEM)/2], false},
		{"written", certPEM, true},
	} {
		if step.content != nil {
			if err := os.WriteFile(servingCert, step.content, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg, ok := readyTrusting(srv.URL, servingCert, admin.adminCert, admin.adminKey)
		if ok != step.ready {
			t.Fatalf("%s: ready %v, want %v", step.name, ok, step.ready)
		}
		if ok && string(cfg.CAData) != string(certPEM) {
			t.Fatalf("%s: the client trusts %q, want the serving certificate", step.name, cfg.CAData)
		}
	}
}
