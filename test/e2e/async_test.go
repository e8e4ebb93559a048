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

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestAsyncHandOff: the caller gets 202 while the destination still holds
// the call, and the event then arrives whole.
func TestAsyncHandOff(t *testing.T) {
	p := startProxy(t)
	dest := newHeldSink(t)
	resp := p.post(t, `{"n":1}`, "Kn-Forward-To", dest.URL, "Prefer", "respond-async", "Content-Type", "application/json", "Ce-Id", "a1")
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "the event reaches the destination", func() bool { return dest.Count() == 1 })
	got := dest.Requests()[0]
	if string(got.Body) != `{"n":1}` || got.Header.Get("Ce-Id") != "a1" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("destination got body %q, headers %v", got.Body, got.Header)
	}
	if got.Header.Get("Prefer") != "" {
		t.Errorf("Prefer %q reached the destination; respond-async was meant for the proxy", got.Header.Get("Prefer"))
	}
	dest.Release()
}

// TestAsyncRetries: the proxy owns the retries of async calls and honours
// the destination's Retry-After.
func TestAsyncRetries(t *testing.T) {
	p := startProxy(t)
	t.Run("retry after 503 honouring Retry-After", func(t *testing.T) {
		dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}})
		resp := p.post(t, "payload", "Kn-Forward-To", dest.URL, "Prefer", "respond-async", "Kn-Forward-Backoff-Delay", "PT0.01S")
		resp.Body.Close()
		eventually(t, 10*time.Second, "the second attempt", func() bool { return dest.Count() == 2 })
		reqs := dest.Requests()
		if gap := reqs[1].At.Sub(reqs[0].At); gap < 900*time.Millisecond {
			t.Errorf("retried after %s although the destination asked for Retry-After: 1", gap)
		}
		if string(reqs[1].Body) != "payload" {
			t.Errorf("retry carried %q", reqs[1].Body)
		}
	})
	t.Run("gives up after Kn-Forward-Retry and logs the loss", func(t *testing.T) {
		dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusInternalServerError) }})
		resp := p.post(t, "payload", "Kn-Forward-To", dest.URL, "Prefer", "respond-async",
			"Kn-Forward-Retry", "2", "Kn-Forward-Backoff-Delay", "PT0.01S", "Ce-Id", "lost-1", "Ce-Source", "/src")
		resp.Body.Close()
		eventually(t, 10*time.Second, "the final failure is logged", func() bool {
			return strings.Contains(p.Logs.String(), `"ceId":"lost-1"`) && strings.Contains(p.Logs.String(), "Async delivery failed")
		})
		if n := dest.Count(); n != 3 {
			t.Errorf("%d attempts, want 1 + 2 retries", n)
		}
	})
	t.Run("a 400 is final", func(t *testing.T) {
		dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadRequest) }})
		resp := p.post(t, "payload", "Kn-Forward-To", dest.URL, "Prefer", "respond-async", "Kn-Forward-Backoff-Delay", "PT0.01S", "Ce-Id", "bad-1")
		resp.Body.Close()
		eventually(t, 10*time.Second, "the failure is logged", func() bool { return strings.Contains(p.Logs.String(), `"ceId":"bad-1"`) })
		if n := dest.Count(); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
	t.Run("sync calls are never retried", func(t *testing.T) {
		dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
		}})
		resp := p.post(t, "payload", "Kn-Forward-To", dest.URL)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("Kn-Forward-Error") != "" {
			t.Errorf("got %d Retry-After %q Kn-Forward-Error %q; want the destination's own 503 unchanged",
				resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Kn-Forward-Error"))
		}
		if n := dest.Count(); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
}

// TestDrain: on SIGTERM the held call runs to completion while new calls get
// 503 draining and readiness fails; then the process exits 0.
func TestDrain(t *testing.T) {
	p := startProxy(t)
	dest := newHeldSink(t)
	asyncDest := newHeldSink(t)
	held := make(chan *http.Response, 1)
	go func() { held <- p.post(t, "sync", "Kn-Forward-To", dest.URL) }()
	resp := p.post(t, "async", "Kn-Forward-To", asyncDest.URL, "Prefer", "respond-async")
	resp.Body.Close()
	eventually(t, 10*time.Second, "both calls are held", func() bool { return dest.Count() == 1 && asyncDest.Count() == 1 })

	p.Signal(syscall.SIGTERM)
	eventually(t, 10*time.Second, "readiness fails", func() bool {
		r, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusServiceUnavailable
	})
	other := testproc.NewSink(t, nil)
	checkAnswer(t, readAnswer(t, p.post(t, "new", "Kn-Forward-To", other.URL)), 503, "draining")
	if other.Count() != 0 {
		t.Error("a call made while draining reached its destination")
	}
	select {
	case <-p.Done():
		t.Fatal("the proxy exited while holding calls")
	default:
	}

	dest.Release()
	asyncDest.Release()
	r := <-held
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || string(body) != "released" {
		t.Errorf("the held call ended with %d %q", r.StatusCode, body)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Errorf("the proxy exited with %v, want 0", err)
	}
	if !strings.Contains(p.Logs.String(), "Drained") {
		t.Errorf("no drain completion in the logs")
	}
}

// TestDrainDeadlineLogsAbandonedEvents: an async call still held when the
// drain timeout passes is cancelled and logged with its event id.
func TestDrainDeadlineLogsAbandonedEvents(t *testing.T) {
	p := startProxy(t, "FORWARD_DRAIN_TIMEOUT=300ms")
	cancelled := make(chan struct{})
	dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, _ int) {
		<-r.Context().Done()
		close(cancelled)
	}})
	resp := p.post(t, "async", "Kn-Forward-To", dest.URL, "Prefer", "respond-async", "Ce-Id", "stuck-1")
	resp.Body.Close()
	eventually(t, 10*time.Second, "the call is held", func() bool { return dest.Count() == 1 })
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(30 * time.Second); err != nil {
		t.Errorf("the proxy exited with %v, want 0", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the destination's call was not cancelled")
	}
	if logs := p.Logs.String(); !strings.Contains(logs, "Abandoned async event at shutdown") || !strings.Contains(logs, `"ceId":"stuck-1"`) {
		t.Errorf("the abandoned event is not logged:\n%s", logs)
	}
}

// TestCallerGoneCancelsDestinationCall: when the caller disconnects, the
// call to the destination is cancelled and its slot freed.
func TestCallerGoneCancelsDestinationCall(t *testing.T) {
	p := startProxy(t, "FORWARD_MAX_INFLIGHT=1", "FORWARD_TENANT_RESERVE=0")
	cancelled := make(chan struct{}, 1)
	dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			<-r.Context().Done()
			cancelled <- struct{}{}
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, strings.NewReader("x"))
	req.Header.Set("Kn-Forward-To", dest.URL)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	eventually(t, 10*time.Second, "the call is held", func() bool { return dest.Count() == 1 })
	cancel()
	<-errc
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the destination's call was not cancelled")
	}
	// The only slot is free again: the next call is admitted.
	eventually(t, 10*time.Second, "the slot is free", func() bool {
		resp := p.post(t, "y", "Kn-Forward-To", dest.URL)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestDrainDeadlineAnswersHeldSyncCalls: a synchronous call still held when
// the drain timeout passes gets the proxy's 503 draining, never a bare
// connection reset, and the process still exits 0.
func TestDrainDeadlineAnswersHeldSyncCalls(t *testing.T) {
	p := startProxy(t, "FORWARD_DRAIN_TIMEOUT=300ms")
	dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }})
	answer := make(chan *http.Response, 1)
	go func() { answer <- p.post(t, "sync", "Kn-Forward-To", dest.URL) }()
	eventually(t, 10*time.Second, "the call is held", func() bool { return dest.Count() == 1 })
	p.Signal(syscall.SIGTERM)
	select {
	case resp := <-answer:
		checkAnswer(t, readAnswer(t, resp), 503, "draining")
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the held call")
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Errorf("the proxy exited with %v, want 0", err)
	}
}
