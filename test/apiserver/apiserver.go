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

// Package apiserver runs a real Kubernetes API server for tests: etcd and
// kube-apiserver v1.37.2 as processes on 127.0.0.1 with random ports, with
// the Knative Serving and Eventing CRDs installed.
//
// The binaries are built from the pinned module test/tools by `make tools`
// (which `make test` runs first) and cached in .cache/bin at the root of the
// repository; TEST_TOOLS_BIN names another folder holding kube-apiserver
// and etcd. Without them Start fails the test: it never skips.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Server is a running API server.
type Server struct {
	// Config is an admin's configuration (group system:masters).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same admin
	// credentials, for processes (KUBECONFIG, --kubeconfig).
	Kubeconfig string
	// URL is the API server's address, https://127.0.0.1:<port>.
	URL string
	// Issuer is the service-account token issuer (--service-account-issuer),
	// equal to URL: its OIDC discovery document is served at
	// Issuer + "/.well-known/openid-configuration".
	Issuer string
	// CAData is the PEM bundle that verifies the API server's serving
	// certificate.
	CAData []byte
	// Kubectl is the path of kubectl at the API server's version, for
	// scripts run against it (with KUBECONFIG=Kubeconfig).
	Kubectl string
}

const (
	startAttempts = 3 // a chosen port may be taken before it is bound
	// readyTimeout bounds etcd and kube-apiserver both ready. Idle, they
	// are in about 5 s; in make test, beside the cluster, the race-built
	// tests and the fuzzers, kube-apiserver has needed more than 90 s.
	readyTimeout = 4 * time.Minute
	stopGrace    = 10 * time.Second
)

// Start runs etcd and kube-apiserver, installs the Knative CRDs and returns
// once the API server is ready and the CRDs are established. Test cleanup
// stops both processes and removes their files.
func Start(t testing.TB) *Server {
	t.Helper()
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for attempt := range startAttempts {
		dir := t.TempDir() // removed after the processes are stopped
		s, stop, err := start(bins, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("attempt %d: %w", attempt+1, err))
			if errors.As(err, new(*exitError)) {
				continue // most likely a port taken meanwhile: new ports
			}
			break
		}
		t.Cleanup(stop)
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := installKnativeCRDs(ctx, s.Config); err != nil {
			t.Fatalf("installing Knative CRDs: %v", err)
		}
		return s
	}
	t.Fatalf("cannot start the API server: %v", errors.Join(errs...))
	return nil
}

// start runs etcd and kube-apiserver with their files in dir. stop ends
// both; it is nil when err is not.
func start(bins toolBinaries, dir string) (s *Server, stop func(), err error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	pki, err := newPKI(dir)
	if err != nil {
		return nil, nil, err
	}

	var procs []*process
	stopAll := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(stopGrace)
		}
	}
	defer func() {
		if err != nil {
			stopAll()
		}
	}()

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd, err := startProcess("etcd", bins.etcd, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, nil, err
	}
	procs = append(procs, etcd)
	deadline := time.Now().Add(readyTimeout)
	if err := waitFor(deadline, etcd, func() bool { return etcdHealthy(etcdURL) }); err != nil {
		return nil, nil, err
	}

	url := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	certDir := filepath.Join(dir, "certs")
	api, err := startProcess("kube-apiserver", bins.apiserver, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + certDir, // self-signed serving certificate
		"--client-ca-file=" + pki.caFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + url,
		"--service-account-key-file=" + pki.saPubFile,
		"--service-account-signing-key-file=" + pki.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
	}, filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, nil, err
	}
	procs = append(procs, api)

	s = &Server{URL: url, Issuer: url, Kubeconfig: filepath.Join(dir, "kubeconfig"), Kubectl: bins.kubectl}
	servingCert := filepath.Join(certDir, "apiserver.crt")
	ready := func() bool {
		cfg, ok := readyTrusting(url, servingCert, pki.adminCert, pki.adminKey)
		if ok {
			s.Config, s.CAData = cfg, cfg.CAData
		}
		return ok
	}
	if err := waitFor(deadline, api, ready); err != nil {
		return nil, nil, err
	}
	if err := writeKubeconfig(s.Kubeconfig, s.Config); err != nil {
		return nil, nil, err
	}
	return s, stopAll, nil
}

// waitFor polls ok until it holds, p exits or the deadline passes.
func waitFor(deadline time.Time, p *process, ok func() bool) error {
	for {
		if ok() {
			return nil
		}
		if done, _ := p.exited(); done {
			return p.failure()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready %v after etcd started; end of %s:\n%s", p.name, readyTimeout, p.logPath, p.tail(4096))
		}
		select {
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func etcdHealthy(url string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(url + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// readyTrusting reads servingCert, which kube-apiserver writes before it
// serves (its serving certificate followed by the CA that signed it), and
// reports whether GET url/readyz answers 200 to a client that trusts it
// and presents the admin certificate; cfg is that client's. The file is
// read again at every call: it is created before it is written, and a
// loaded machine can read it empty or cut short.
func readyTrusting(url, servingCert string, adminCert, adminKey []byte) (cfg *rest.Config, ok bool) {
	caData, err := os.ReadFile(servingCert)
	if err != nil {
		return nil, false
	}
	cfg = &rest.Config{
		Host:            url,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData, CertData: adminCert, KeyData: adminKey},
		QPS:             200,
		Burst:           400,
	}
	return cfg, apiReady(cfg)
}

// apiReady reports whether GET /readyz answers 200 to cfg's credentials.
func apiReady(cfg *rest.Config) bool {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false
	}
	defer c.CloseIdleConnections()
	c.Timeout = 2 * time.Second
	resp, err := c.Get(cfg.Host + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: adminUser}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}
