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

package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// newTransport returns a load-generator transport speaking protocol:
// h2c with prior knowledge (one connection carries as many streams as the
// server allows), or HTTP/1.1 with keep-alive and up to idle idle
// connections, never capping how many are open at once.
func newTransport(protocol string, idle int) *http.Transport {
	t := &http.Transport{
		Proxy:               nil,
		DisableCompression:  true,
		MaxIdleConnsPerHost: max(idle, 2),
		IdleConnTimeout:     5 * time.Minute,
		Protocols:           new(http.Protocols),
	}
	if protocol == H2C {
		t.Protocols.SetUnencryptedHTTP2(true)
		t.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerConnection: 4 << 20, MaxReceiveBufferPerStream: 64 << 10}
	} else {
		t.Protocols.SetHTTP1(true)
	}
	return t
}

// pool spreads calls over a few transports, so that h2c load is carried
// by several connections as a fleet of senders would.
type pool struct {
	ts   []*http.Transport
	next atomic.Uint64
}

func newPool(protocol string, n, idle int) *pool {
	p := &pool{}
	for range max(n, 1) {
		p.ts = append(p.ts, newTransport(protocol, idle))
	}
	return p
}

func (p *pool) RoundTrip(r *http.Request) (*http.Response, error) {
	i := p.next.Add(1) % uint64(len(p.ts))
	return p.ts[i].RoundTrip(r)
}

func (p *pool) close() {
	for _, t := range p.ts {
		t.CloseIdleConnections()
	}
}

// event is the body of every bench call: a small binary-mode CloudEvent.
var event = []byte(`{"message":"Hello world!","padding":"0123456789abcdef0123456789abcdef"}`)

// newCall returns a POST of the bench event to base+path; with dest set it
// names dest in Kn-Forward-To (a call through a peer).
func newCall(ctx context.Context, base, path, dest string, seq uint64) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Ce-Specversion"] = []string{"1.0"}
	h["Ce-Id"] = []string{strconv.FormatUint(seq, 10)}
	h["Ce-Source"] = []string{"/apis/v1/namespaces/bench/pingsources/load"}
	h["Ce-Type"] = []string{"dev.knative.sources.ping"}
	h["Content-Type"] = []string{"application/json"}
	if dest != "" {
		h["Kn-Forward-To"] = []string{dest}
	}
	return req, nil
}

// roundTrip sends req and returns the time to response headers and
// whether the answer was 200; the body is read to the end and closed.
func roundTrip(rt http.RoundTripper, req *http.Request) (time.Duration, bool) {
	d, err := roundTripErr(rt, req)
	return d, err == nil
}

// roundTripErr is roundTrip that says why a call was not answered 200.
func roundTripErr(rt http.RoundTripper, req *http.Request) (time.Duration, error) {
	return roundTripStatus(rt, req, http.StatusOK)
}

// roundTripStatus is roundTripErr for an answer of status want.
func roundTripStatus(rt http.RoundTripper, req *http.Request, want int) (time.Duration, error) {
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != want {
		return d, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return d, nil
}
