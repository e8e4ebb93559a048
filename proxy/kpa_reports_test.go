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
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// queueProxy stands for Knative's queue-proxy in front of the proxy, over
// real sockets: it passes every request on and counts those in flight, as
// the KPA reads them.
type queueProxy struct {
	URL      string
	inflight atomic.Int64
	reports  atomic.Int64 // report requests seen, ended or not
	srv      *httptest.Server
}

// newQueueProxy listens at once, so that its URL can be given to the
// proxy it serves; start points it there.
func newQueueProxy(t *testing.T) *queueProxy {
	t.Helper()
	q := &queueProxy{srv: httptest.NewUnstartedServer(nil)}
	q.URL = "http://" + q.srv.Listener.Addr().String()
	return q
}

func (q *queueProxy) start(t *testing.T, proxyURL string) {
	t.Helper()
	target, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	q.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerKPAReport) != "" {
			q.reports.Add(1)
		}
		q.inflight.Add(1)
		defer q.inflight.Add(-1)
		rp.ServeHTTP(w, r)
	})
	q.srv.Start()
	t.Cleanup(q.srv.Close)
}

// newReportingProxy is a proxy reporting through a queueProxy in front of
// it, with env on top of baseEnv.
func newReportingProxy(t *testing.T, env map[string]string) (*testProxy, *queueProxy) {
	t.Helper()
	q := newQueueProxy(t)
	all := map[string]string{"FORWARD_KPA_REPORT_URL": q.URL}
	for k, v := range env {
		all[k] = v
	}
	tp := newTestProxy(t, all)
	t.Cleanup(tp.Drain) // stops the reports; Drain again is harmless
	q.start(t, tp.URL)
	return tp, q
}

// sendAsync hands n events to dest through q and checks each got 202.
func sendAsync(t *testing.T, q *queueProxy, dest string, n int) {
	t.Helper()
	c := h1Client(t)
	for i := range n {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, q.URL+"/", bytes.NewReader(event))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Kn-Forward-To", dest)
		req.Header.Set("Prefer", "respond-async")
		req.Header.Set("Ce-Id", fmt.Sprint("e-", i))
		if resp, body := do(t, c, req); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("event %d: %d %q, want 202", i, resp.StatusCode, body)
		}
	}
}

// TestKPAReportsFollowTheAsyncCallsHeld: with 3 calls a report, queue-proxy
// sees one request held open per 3 async calls the proxy holds, rounded
// up, and none once they are delivered; a synchronous call counts as
// itself.
func TestKPAReportsFollowTheAsyncCallsHeld(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp, q := newReportingProxy(t, map[string]string{"FORWARD_KPA_CALLS_PER_REPORT": "3"})

	sendAsync(t, q, dest.URL, 7)
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 3 },
		"queue-proxy does not see 3 reports for 7 async calls")
	if n := tp.Limiter.Inflight(); n != 7 {
		t.Errorf("Inflight() = %d, want the 7 async calls: a report is no call", n)
	}
	for _, r := range dest.Requests() {
		if r.Header.Get(headerKPAReport) != "" {
			t.Errorf("a report reached the destination: %v", r.Header)
		}
	}

	// One synchronous call on top: queue-proxy counts it, no report.
	sync := goDo(h1Client(t), func() *http.Request {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, q.URL+"/", bytes.NewReader(event))
		req.Header.Set("Kn-Forward-To", dest.URL)
		return req
	}())
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 4 && tp.Limiter.Inflight() == 8 },
		"queue-proxy does not see the synchronous call beside 3 reports")

	hold.Release()
	if r := await(t, sync); r.err != nil || r.resp.StatusCode != http.StatusOK {
		t.Fatalf("synchronous call: %+v", r)
	}
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 0 },
		"reports still held once every call was delivered")
}

// TestKPAReportsEndAtDrain: a draining pod holds no report, while its
// async calls go on.
func TestKPAReportsEndAtDrain(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp, q := newReportingProxy(t, map[string]string{"FORWARD_KPA_CALLS_PER_REPORT": "1"})
	sendAsync(t, q, dest.URL, 4)
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 4 }, "no report per async call")

	tp.Drain()
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 0 }, "reports held after Drain")
	if n := tp.Limiter.Inflight(); n != 4 {
		t.Errorf("Inflight() = %d after Drain, want the 4 async calls still held", n)
	}
	seen := q.reports.Load()
	hold.Release()
	proxytest.Eventually(t, 10*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "async calls not delivered")
	if n := q.reports.Load(); n != seen {
		t.Errorf("%d reports sent after Drain", n-seen)
	}
}

// TestKPAReportsRenewAtTheirMaxAge: a report ends at its age and another
// takes its place, so queue-proxy's timeout never cuts one.
func TestKPAReportsRenewAtTheirMaxAge(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	_, q := newReportingProxy(t, map[string]string{"FORWARD_KPA_CALLS_PER_REPORT": "2", "FORWARD_KPA_REPORT_MAX_AGE": "1s"})
	sendAsync(t, q, dest.URL, 4)
	proxytest.Eventually(t, 20*time.Second, func() bool { return q.reports.Load() >= 6 }, "reports not renewed at their age")
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 2 }, "not 2 reports held after renewals")
	hold.Release()
	proxytest.Eventually(t, 10*time.Second, func() bool { return q.inflight.Load() == 0 }, "reports held after delivery")
}

// TestKPAReportHeaderFromACaller: a caller's request that names a report
// without the process's secret is an ordinary call, and the header does
// not reach the destination.
func TestKPAReportHeaderFromACaller(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	_, q := newReportingProxy(t, nil)
	for _, v := range []string{"guess/1", "/1", "x", "guess/"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, q.URL+"/", bytes.NewReader(event))
		req.Header.Set("Kn-Forward-To", dest.URL)
		req.Header.Set(headerKPAReport, v)
		resp, body := do(t, h1Client(t), req)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %q: %d %q, want the destination's 200", headerKPAReport, v, resp.StatusCode, body)
		}
		if got := dest.Next(t).Header.Get(headerKPAReport); got != "" {
			t.Errorf("%s: %q reached the destination", headerKPAReport, got)
		}
	}
	// No destination: the contract's answer, not a held request.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, q.URL+"/", nil)
	req.Header.Set(headerKPAReport, "guess/1")
	resp, body := do(t, h1Client(t), req)
	wantProxyError(t, resp, body, ReasonMissingDestination)
}

// TestKPAReportsFailing: when queue-proxy cuts every report, the failure
// is logged once a minute however often reports are tried, and calls are
// served as ever.
func TestKPAReportsFailing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var tried atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tried.Add(1)
			c.Close()
		}
	}()
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	core, logs := observer.New(zap.ErrorLevel)
	tp := newTestProxyLogger(t, map[string]string{"FORWARD_KPA_REPORT_URL": "http://" + ln.Addr().String()}, zap.New(core).Sugar())
	t.Cleanup(tp.Drain)
	req := tp.newRequest(t, dest.URL, bytes.NewReader(event))
	req.Header.Set("Prefer", "respond-async")
	if resp, body := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %q, want 202", resp.StatusCode, body)
	}
	// Three tries, one a second at most, all within the minute.
	proxytest.Eventually(t, 30*time.Second, func() bool { return tried.Load() >= 3 }, "reports not tried again")
	if n := logs.FilterMessageSnippet("A KPA report failed").Len(); n != 1 {
		t.Errorf("%d failed reports logged after %d tries, want 1 a minute", n, tried.Load())
	}
	hold.Release()
	proxytest.Eventually(t, 10*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the async call was not delivered")
}
