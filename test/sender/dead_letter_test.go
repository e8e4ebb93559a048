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

package sender

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/eventingtest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// request is one request as a recorder got it.
type request struct {
	header http.Header
	body   []byte
}

// recorder keeps every request it gets and answers each with status and
// body.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newRecorder(tb testing.TB, status int, body string) *recorder {
	tb.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, request{header: req.Header.Clone(), body: b})
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.reqs...)
}

// TestDeadLetterBothRoutes: an async event whose sink fails every attempt
// reaches the dead-letter sink config-event-forwarding names, with the
// error extensions eventing's dispatcher writes for the same failure,
// whether the Sender sent it directly or handed it to the proxy process;
// and when the proxy does not allow the dead-letter sink, it refuses the
// hand-off and the Sender sends and dead-letters the event itself.
func TestDeadLetterBothRoutes(t *testing.T) {
	t.Parallel()
	proxy := startProxy(t)
	tests := []struct {
		name      string
		viaProxy  bool
		dlsHost   string // "localhost" is no destination the proxy allows
		wantRoute adapter.Route
	}{
		{name: "direct", dlsHost: "127.0.0.1", wantRoute: adapter.RouteDirect},
		{name: "through the proxy", viaProxy: true, dlsHost: "127.0.0.1", wantRoute: adapter.RouteProxy},
		{name: "dead-letter sink the proxy denies", viaProxy: true, dlsHost: "localhost", wantRoute: adapter.RouteDirect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newRecorder(t, http.StatusServiceUnavailable, "try later")
			dls := newRecorder(t, http.StatusOK, "")
			dlsURL := mustURL(t, dls.URL+"/dead")
			dlsURL.Host = tc.dlsHost + ":" + dlsURL.Port()
			c := config.Forwarding{DeadLetterSink: dlsURL, LinearBackoff: true}
			if tc.viaProxy {
				c.ProxyURL = mustURL(t, proxy.URL)
			}
			s := adapter.NewSender(adapter.SenderParams{Retries: 2, BackoffDelay: 10 * time.Millisecond})
			s.SetForwarding(c)
			res, err := s.Send(ctxFor(t, 30*time.Second), adapter.Target{URL: mustURL(t, sink.URL+"/in"), Namespace: "tenant"}, pingEvent("dl-1"))
			if err != nil || res.Route != tc.wantRoute || res.Fallback != (tc.viaProxy && tc.wantRoute == adapter.RouteDirect) {
				t.Fatalf("Send: %v, result %+v; want it taken by the %s route", err, res, tc.wantRoute)
			}
			testproc.Eventually(t, 20*time.Second, "the dead-letter sink gets the event", func() bool { return len(dls.requests()) > 0 })
			if n := len(sink.requests()); n != 3 {
				t.Errorf("the sink got %d attempts, want 3 (two retries)", n)
			}
			sent, got := sink.requests()[0], dls.requests()[0]
			eventingtest.WantErrorExtensions(t, got.header, got.body, sent.header, sent.body, sink.URL+"/in", http.StatusServiceUnavailable, []byte("try later"))
			if tc.wantRoute == adapter.RouteProxy {
				testproc.Eventually(t, 10*time.Second, "the proxy counts the event dead-lettered", func() bool {
					return proxy.metric("kn_forward_dead_letters_total", `outcome="delivered"`, `reason="5xx"`) == 1
				})
			} else if !res.DeadLettered {
				t.Errorf("result %+v, want it dead-lettered by the Sender", res)
			}
		})
	}
}
