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

package certtest

import (
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"os"
	"os/exec"
	"testing"
)

// publicRoot is a public CA's root certificate, ISRG Root X1 (Let's
// Encrypt's), as the CA files of a Debian machine hold it.
//
//go:embed isrg-root-x1.pem
var publicRoot []byte

// noCAFilesEnv marks the test binary's run in which the check happens.
const noCAFilesEnv = "CERTTEST_NO_CA_FILES"

// SystemRootsWithoutCAFiles fails t unless, in a process with no CA file
// to read, as in the release's images, which hold the binary only, the
// system roots still trust a public CA: the binary carries roots of its
// own (golang.org/x/crypto/x509roots/fallback). It runs the calling test
// again in a child process of the test binary, with SSL_CERT_FILE and
// SSL_CERT_DIR naming nothing, since Go reads the roots once a process.
func SystemRootsWithoutCAFiles(t *testing.T) {
	t.Helper()
	if os.Getenv(noCAFilesEnv) == "1" {
		block, _ := pem.Decode(publicRoot)
		root, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		// Roots nil: the system roots.
		if _, err := root.Verify(x509.VerifyOptions{}); err != nil {
			t.Fatalf("with no CA files, %s: %v", root.Subject.CommonName, err)
		}
		return
	}
	missing := t.TempDir() + "/none"
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v") //nolint:gosec // the test binary itself, running this test
	cmd.Env = append(os.Environ(), noCAFilesEnv+"=1", "SSL_CERT_FILE="+missing, "SSL_CERT_DIR="+missing)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the check in a process without CA files: %v\n%s", err, out)
	}
}
