//go:build cluster

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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// viaIngress is an HTTP client whose every connection goes to Traefik's
// cluster-local entry point, so a request for http://<route host>/ takes
// the real path: Traefik, then the activator or queue-proxy, then the pod.
var viaIngress = &http.Client{
	Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, cluster.ingress)
		},
		MaxIdleConnsPerHost: 100,
	},
	// Bounds every call; tests that hold longer say so in their own context.
	Timeout: 11 * time.Minute,
}

// answer is what a caller of the proxy got.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// reason is the proxy's Kn-Forward-Error, "" on a destination's answer.
func (a answer) reason() string { return a.Header.Get("Kn-Forward-Error") }

// forward sends body to the proxy through the ingress, for destination,
// with the given headers (Kn-Forward-To is set from destination unless
// headers names it, even as "").
func forward(ctx context.Context, t testing.TB, destination string, headers map[string]string, body []byte) answer {
	t.Helper()
	a, err := tryForward(ctx, destination, headers, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tryForward is forward for other goroutines than the test's.
func tryForward(ctx context.Context, destination string, headers map[string]string, body []byte) (answer, error) {
	return installed.tryForward(ctx, destination, headers, body)
}

// tryForward sends body to p through the ingress, as forward does.
func (p proxyInstance) tryForward(ctx context.Context, destination string, headers map[string]string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.host()+"/", strings.NewReader(string(body)))
	if err != nil {
		return answer{}, err
	}
	if _, ok := headers["Kn-Forward-To"]; !ok {
		req.Header.Set("Kn-Forward-To", destination)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := viaIngress.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("POST via the ingress: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// proxyError is the JSON body of an answer the proxy made itself.
type proxyError struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// checkRefusal checks an answer is the proxy's own, with status and
// reason, in the contract's form.
func checkRefusal(t testing.TB, a answer, status int, reason string) {
	t.Helper()
	if a.Status != status || a.reason() != reason {
		t.Fatalf("got %d %q (%s), want %d %q", a.Status, a.reason(), a.Body, status, reason)
	}
	var e proxyError
	if err := json.Unmarshal(a.Body, &e); err != nil || e.Reason != reason || e.Message == "" {
		t.Errorf("body %q: want JSON with reason %q and a message (%v)", a.Body, reason, err)
	}
	if ct := a.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
}
