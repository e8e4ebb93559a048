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

package proxy

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// baseEnv is the environment every in-process proxy of these tests starts
// from: loopback destinations allowed, small limits, fast async retries.
var baseEnv = map[string]string{
	"FORWARD_ALLOWED_CIDRS":                "127.0.0.0/8",
	"FORWARD_MAX_INFLIGHT":                 "8",
	"FORWARD_MAX_INFLIGHT_PER_DESTINATION": "8",
	"FORWARD_MAX_INFLIGHT_PER_TENANT":      "8",
	"FORWARD_TENANT_RESERVE":               "0",
	"FORWARD_MAX_EVENT_BYTES":              "1024",
	"FORWARD_MAX_TIMEOUT":                  "10s",
	"FORWARD_DIAL_TIMEOUT":                 "2s",
	"FORWARD_ASYNC_RETRY":                  "2",
	"FORWARD_ASYNC_BACKOFF_DELAY":          "10ms",
	"FORWARD_ASYNC_BACKOFF_MAX":            "50ms",
	"FORWARD_ASYNC_MAX_RETRY_AFTER":        "50ms",
}

// h2cLoopback makes the proxy speak h2c to destinations on 127.0.0.1 (in
// auto mode, the default); without it they get HTTP/1.1.
var h2cLoopback = map[string]string{"FORWARD_H2C_HOSTS": "127.0.0.1"}

// testConfig reads the configuration of baseEnv with env on top; an empty
// value in env unsets the variable.
func testConfig(t testing.TB, env map[string]string) *config.Proxy {
	t.Helper()
	all := maps.Clone(baseEnv)
	maps.Copy(all, env)
	cfg, err := config.ProxyFromEnv(func(k string) (string, bool) {
		v, ok := all[k]
		return v, ok && v != ""
	}, 0)
	if err != nil {
		t.Fatalf("config.ProxyFromEnv: %v", err)
	}
	return cfg
}

// testProxy is an in-process proxy served by an httptest server that uses
// the real inbound server settings (HTTP/1.1 and h2c).
type testProxy struct {
	*Proxy
	URL string
}

// newTestProxy builds a proxy from baseEnv plus env with a no-op logger.
func newTestProxy(t testing.TB, env map[string]string) *testProxy {
	t.Helper()
	return newTestProxyLogger(t, env, zap.NewNop().Sugar())
}

// newTestProxyLogger is newTestProxy with the given logger. When the test
// ends (after held destinations were let go by the test's context), the
// server closes and every held or background call must end within 5 s.
func newTestProxyLogger(t testing.TB, env map[string]string, logger *zap.SugaredLogger, opts ...Option) *testProxy {
	t.Helper()
	cfg := testConfig(t, env)
	p := New(cfg, logger, opts...)
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = p.Server(cfg, logger)
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("calls still held when the test ended: Shutdown: %v", err)
		}
	})
	return &testProxy{Proxy: p, URL: ts.URL}
}

// newRequest returns a POST to the proxy that names dest in Kn-Forward-To
// (none if dest is empty), bound to the test's context.
func (tp *testProxy) newRequest(t testing.TB, dest string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, tp.URL+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	if dest != "" {
		req.Header.Set(delivery.HeaderForwardTo, dest)
	}
	return req
}

// h1Client speaks HTTP/1.1 with keep-alive.
func h1Client(t testing.TB) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// h2cClient speaks HTTP/2 with prior knowledge over plain TCP and, as
// h1Client, asks for no compression: what a test sends of Accept-Encoding
// is all the proxy sees.
func h2cClient(t testing.TB) *http.Client {
	c := testproc.H2CClient(t, 0)
	c.Transport.(*http.Transport).DisableCompression = true
	return c
}

// do sends req and returns the response with its whole body, failing the
// test if that takes more than 5 s.
func do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	r := await(t, goDo(c, req))
	if r.err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, r.err)
	}
	return r.resp, r.body
}

type result struct {
	resp *http.Response
	body []byte
	err  error
}

// goDo sends req in the background; the channel yields its result.
func goDo(c *http.Client, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		ch <- result{resp: resp, body: body, err: err}
	}()
	return ch
}

// await returns the result of a background call, failing after 5 s.
func await(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end within 5s")
		return result{}
	}
}

// wantProxyError checks an answer the proxy made itself: the reason's
// status, the Kn-Forward-Error header, the JSON body and Retry-After on
// 429 and 503 only.
func wantProxyError(t testing.TB, resp *http.Response, body []byte, reason Reason) {
	t.Helper()
	if resp.StatusCode != reason.Status() {
		t.Errorf("status = %d, want %d (%s); body %q", resp.StatusCode, reason.Status(), reason, body)
	}
	if got := resp.Header.Get(delivery.HeaderForwardError); got != string(reason) {
		t.Errorf("%s = %q, want %q; body %q", delivery.HeaderForwardError, got, reason, body)
	}
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Errorf("body %q is not the JSON error body: %v", body, err)
	} else if eb.Reason != reason || eb.Message == "" {
		t.Errorf("body = %+v, want reason %q and a message", eb, reason)
	}
	// Retryable refusals say when to come back in whole seconds: 1, or the
	// cool-down left of an open circuit (TestBreakerRetryAfterIsTheCooldownLeft).
	retryable := reason.Status() == http.StatusTooManyRequests || reason.Status() == http.StatusServiceUnavailable
	got := resp.Header.Get(delivery.HeaderRetryAfter)
	if n, err := strconv.Atoi(got); retryable && (err != nil || n < 1 || reason != ReasonDestinationBusy && n != 1) || !retryable && got != "" {
		t.Errorf("Retry-After = %q on %d", got, resp.StatusCode)
	}
}
