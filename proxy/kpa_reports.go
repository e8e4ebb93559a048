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
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// headerKPAReport marks a report request: the process's own secret, so
// that no caller can hold a request open as one, then "/" and the
// report's number.
const headerKPAReport = "Kn-Forward-Kpa-Report"

// KPAReportParams configures KPAReports.
type KPAReportParams struct {
	// URL is queue-proxy's address in the pod (FORWARD_KPA_REPORT_URL).
	URL string
	// CallsPerReport is how many async calls one report stands for
	// (FORWARD_KPA_CALLS_PER_REPORT).
	CallsPerReport int
	// MaxAge ends a report, which the next adjustment replaces, before
	// queue-proxy's own timeout would (FORWARD_KPA_REPORT_MAX_AGE).
	MaxAge time.Duration
	// Interval is how often the number of reports follows the calls held.
	// If zero, 1 s: the KPA reads queue-proxy's concurrency every second.
	Interval time.Duration
}

// KPAReports make the async calls a pod holds visible to Knative's Pod
// Autoscaler, which scales a revision on the requests its queue-proxies
// have in flight. An async call leaves queue-proxy at its 202, while the
// pod delivers it for minutes; so the proxy keeps requests of its own
// open through queue-proxy, back to itself, one per CallsPerReport async
// calls held (rounded up): the KPA sees async calls / CallsPerReport on
// top of the synchronous calls, which queue-proxy counts itself.
type KPAReports struct {
	p      KPAReportParams
	held   func() int // the async calls held now
	secret string
	client *http.Client
	logger *zap.SugaredLogger

	mu      sync.Mutex
	reports map[uint64]*report // sent, until their request returns
	live    int                // of them, those not ended by adjust
	next    uint64
	stopped bool
	lastErr time.Time // when a failed report was last logged

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// A report is one request held open through queue-proxy.
type report struct {
	hold  chan struct{} // closed to end it; nil until the handler holds it
	ended bool
}

// NewKPAReports starts reporting held() async calls through p.URL. Stop
// ends it.
func NewKPAReports(p KPAReportParams, held func() int, logger *zap.SugaredLogger) *KPAReports {
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &KPAReports{
		p: p, held: held, secret: rand.Text(), logger: logger,
		reports: map[uint64]*report{},
		// One connection per report: queue-proxy counts requests, and an
		// HTTP/1.1 connection carries one at a time.
		client: &http.Client{Transport: &http.Transport{
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		}},
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
	go k.run()
	return k
}

// Wanted is the number of reports for async calls held.
func (k *KPAReports) Wanted(async int) int {
	return (async + k.p.CallsPerReport - 1) / k.p.CallsPerReport
}

func (k *KPAReports) run() {
	defer close(k.done)
	t := time.NewTicker(k.p.Interval)
	defer t.Stop()
	for {
		k.adjust()
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// adjust sends the reports missing, or ends those in excess that the
// handler holds, newest first: the oldest end soon anyway, at MaxAge.
func (k *KPAReports) adjust() {
	want := k.Wanted(k.held())
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	for ; k.live < want; k.live++ {
		k.next++
		k.reports[k.next] = &report{}
		go k.send(k.next)
	}
	if k.live <= want {
		return
	}
	for _, id := range slices.Backward(slices.Sorted(maps.Keys(k.reports))) {
		if r := k.reports[id]; !r.ended && r.hold != nil {
			k.end(r)
			if k.live == want {
				return
			}
		}
	}
}

// end ends r, held by the handler; k.mu is held.
func (k *KPAReports) end(r *report) {
	r.ended = true
	close(r.hold)
	k.live--
}

// send holds report id open until the handler ends it.
func (k *KPAReports) send(id uint64) {
	req, err := http.NewRequestWithContext(k.ctx, http.MethodPost, k.p.URL, http.NoBody)
	if err == nil {
		req.Header.Set(headerKPAReport, k.secret+"/"+strconv.FormatUint(id, 10))
		var resp *http.Response
		if resp, err = k.client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				err = fmt.Errorf("queue-proxy answered %d", resp.StatusCode)
			}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil && k.ctx.Err() == nil && time.Since(k.lastErr) >= time.Minute {
		// Once a minute: an unreachable queue-proxy fails every report,
		// every Interval.
		k.lastErr = time.Now()
		k.logger.Errorw("A KPA report failed: the KPA does not see the async calls held", "url", k.p.URL, "error", err)
	}
	if r := k.reports[id]; !r.ended {
		k.live--
	}
	delete(k.reports, id)
}

// Stop ends every report and sends no more: a draining pod reports
// nothing, and queue-proxy, which drains too, waits for no report.
func (k *KPAReports) Stop() {
	k.mu.Lock()
	k.stopped = true
	for _, r := range k.reports {
		if !r.ended && r.hold != nil {
			k.end(r)
		}
	}
	k.mu.Unlock()
	k.cancel()
	<-k.done
}

// Handler answers the process's own reports, which it holds until adjust
// or Stop ends them or MaxAge passes, and passes every other request to
// next.
func (k *KPAReports) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := k.reportID(r.Header.Get(headerKPAReport))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		k.hold(r.Context(), id)
		w.WriteHeader(http.StatusNoContent)
	})
}

// reportID is the report a header value names, if it holds the secret.
func (k *KPAReports) reportID(v string) (uint64, bool) {
	secret, id, found := strings.Cut(v, "/")
	if !found || subtle.ConstantTimeCompare([]byte(secret), []byte(k.secret)) != 1 {
		return 0, false
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}

// hold waits until report id ends, or MaxAge passes, or its request does.
func (k *KPAReports) hold(ctx context.Context, id uint64) {
	k.mu.Lock()
	r := k.reports[id]
	if r == nil || r.ended || r.hold != nil || k.stopped {
		k.mu.Unlock()
		return
	}
	r.hold = make(chan struct{})
	k.mu.Unlock()
	t := time.NewTimer(k.p.MaxAge)
	defer t.Stop()
	select {
	case <-r.hold:
	case <-t.C:
	case <-ctx.Done():
	}
}
