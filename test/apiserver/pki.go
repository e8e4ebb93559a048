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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// pki is what the harness generates for one API server: a client CA and the
// admin's certificate signed by it, and the service-account key pair.
type pki struct {
	caFile    string // --client-ca-file
	saPubFile string // --service-account-key-file
	saKeyFile string // --service-account-signing-key-file
	adminCert []byte // PEM, CN=adminUser, O=system:masters
	adminKey  []byte // PEM
}

// adminUser is the admin's user name; it is in group system:masters.
const adminUser = "event-forwarding-test-admin"

// newPKI writes the CA and service-account keys into dir.
func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "event-forwarding-test-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	adminKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	adminTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: adminUser, Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	adminDER, err := x509.CreateCertificate(rand.Reader, adminTmpl, ca, adminKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	adminKeyDER, err := x509.MarshalECPrivateKey(adminKey)
	if err != nil {
		return nil, err
	}

	// RS256 service-account tokens: what every OIDC verifier accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}

	p := &pki{
		caFile:    filepath.Join(dir, "client-ca.crt"),
		saPubFile: filepath.Join(dir, "service-account.pub"),
		saKeyFile: filepath.Join(dir, "service-account.key"),
		adminCert: pemBlock("CERTIFICATE", adminDER),
		adminKey:  pemBlock("EC PRIVATE KEY", adminKeyDER),
	}
	files := map[string][]byte{
		p.caFile:    pemBlock("CERTIFICATE", caDER),
		p.saPubFile: pemBlock("PUBLIC KEY", saPubDER),
		p.saKeyFile: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return p, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
