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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/internal/callctx"
)

// AsyncParams configure asynchronous delivery.
type AsyncParams struct {
	ForwardParams
	// MaxBackoff caps the exponential retry delay. If zero, 1 minute.
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a destination's Retry-After delays a
	// retry. If zero, 5 minutes.
	MaxRetryAfter time.Duration
}

// Async answers calls that prefer respond-async with 202 Accepted as soon
// as their body is read, then delivers them in the background, owning the
// retries since the caller is gone. The call keeps its admission slot,
// and the bytes of the memory budget its headers and body take, until its
// last attempt ends. Every call that finally fails, or that is
// abandoned at shutdown, is logged with its destination and event.
type Async struct {
	p       AsyncParams
	h1, h2c http.RoundTripper
	logger  *zap.SugaredLogger
	ctx     context.Context // cancelled by Abort
	abort   context.CancelFunc
	wg      sync.WaitGroup
	starts  starts    // first attempts waiting behind the hand-offs
	spread  *Spreader // nil unless FORWARD_SPREAD_ABOVE is set
	// afterFunc and jitter schedule retries and draw their jitter; tests
	// replace them to read the waits.
	afterFunc func(time.Duration, func()) *time.Timer
	jitter    func(n int64) int64
	pending   atomic.Int64 // events handed off and not yet delivered or lost
}

// NewAsync returns the async hand-off handler.
func NewAsync(p AsyncParams, logger *zap.SugaredLogger) *Async {
	p.defaults()
	// A callctx root: every attempt and backoff hooks into it, for as long
	// as its event is held, at the cost of a small record.
	root := callctx.NewRoot()
	a := &Async{p: p, logger: logger, ctx: root, abort: root.Cancel, afterFunc: time.AfterFunc}
	a.h1, a.h2c = p.roundTrippers()
	return a
}

// job is one event being delivered in the background.
type job struct {
	c       *call
	method  string
	header  http.Header
	body    []byte
	span    trace.SpanContext // the call's server span: parent of the attempts
	bag     baggage.Baggage
	backoff delivery.Backoff
	dead    *deadLetter // nil without Kn-Forward-Dead-Letter-To
}

func (a *Async) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callOf(w, r)
	body, why, err := readBody(w, r, a.p.bodyLimits(), &c.memory)
	switch {
	case errors.Is(err, ErrMemoryBudget):
		// Nothing of the event has gone anywhere: the caller's retry,
		// here or on another pod, cannot duplicate it.
		writeError(w, ReasonOverloaded, "the pod's memory budget has no room for the rest of the body")
		return
	case errors.Is(err, errBodyStalled):
		writeError(w, ReasonBadRequest, why)
		return
	case errors.Is(err, errBodyTooLarge):
		writeError(w, ReasonBodyTooLarge, "the body is larger than the "+strconv.FormatInt(a.p.MaxEventBytes, 10)+" bytes allowed")
		return
	case err != nil && r.Context().Err() != nil:
		return // the caller went away before handing the event over
	case err != nil:
		writeError(w, ReasonBadRequest, "the body could not be read: "+err.Error())
		return
	}
	if a.spread != nil && c.offeredBy == 0 && a.spread.offer(a.ctx, r, body) {
		c.spread = true // the pod that took it delivers it; this slot goes
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusAccepted)
		return
	}
	retry, _ := parseRetryOptions(r.Header) // valid: the destination handler checked
	dead := newDeadLetter(r.Header)
	// The event's headers are the inbound map, edited in place (the server
	// reads nothing of it once the handler runs, except an HTTP/1.0
	// caller's keep-alive wish): one copy fewer per event held.
	h := r.Header
	if !r.ProtoAtLeast(1, 1) {
		h = h.Clone()
	}
	removeHopByHop(h)
	removeForwardHeaders(h)
	withoutRespondAsync(h)
	h.Add(headerCDNLoop, a.p.LoopID)
	j := &job{
		c: c, method: r.Method, header: h, body: body,
		span: trace.SpanContextFromContext(r.Context()),
		bag:  baggage.FromContext(r.Context()),
		backoff: delivery.Backoff{
			Retries: c.retries, Delay: c.backoff,
			Max: a.p.MaxBackoff, MaxRetryAfter: a.p.MaxRetryAfter, Rand: a.jitter,
		},
		dead: dead,
	}
	retry.apply(&j.backoff)
	c.leave(delivering)
	c.metrics.asyncPending(1)
	a.pending.Add(1)
	a.wg.Add(1)
	a.starts.add(a, j)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
}

// readBody reads a whole request body within lim; why says why a body
// that stalled (errBodyStalled) failed. A body of declared length was
// reserved on arrival; one of unknown length grows m with the buffer it is
// read into, before each growth, and fails with ErrMemoryBudget the moment
// the budget has no room for the next.
func readBody(w http.ResponseWriter, r *http.Request, lim bodyLimits, m *reservation) (b []byte, why string, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, "", nil
	}
	body := newGuardedBody(w, r.Body, lim)
	defer body.Close()
	defer func() {
		if errors.Is(err, errBodyStalled) {
			why = body.stallMessage()
		}
	}()
	if r.ContentLength > 0 && r.ContentLength <= lim.max {
		// Exactly the declared bytes, then the end: what an event held for
		// retries costs is its own size.
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, "", err
		}
		if n, err := body.Read(make([]byte, 1)); n > 0 || err != nil && !errors.Is(err, io.EOF) {
			return nil, "", cmp.Or(err, errors.New("the body is longer than its Content-Length"))
		}
		return b, "", nil
	}
	b, err = readGrowing(body, lim.max, m)
	return b, "", err
}

// firstBodyBuffer is the buffer a body of unknown length is read into
// first; each growth doubles it.
const firstBodyBuffer = 4 << 10

// readGrowing reads body to its end into a buffer that doubles as it
// fills, up to limit plus the one byte that tells an oversized body,
// reserving each new buffer's growth in m before it is made. What the
// event keeps is the last buffer, which the reservation covers; the ones
// before are garbage.
func readGrowing(body io.Reader, limit int64, m *reservation) ([]byte, error) {
	var b []byte
	for {
		if len(b) == cap(b) {
			next := min(max(2*int64(cap(b)), firstBodyBuffer), limit+1)
			if next <= int64(cap(b)) {
				return nil, errBodyTooLarge // the body's guard stops it first
			}
			if err := m.grow(next - int64(cap(b))); err != nil {
				return nil, err
			}
			nb := make([]byte, len(b), next)
			copy(nb, b)
			b = nb
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case errors.Is(err, io.EOF):
			return b, nil
		case err != nil:
			return nil, err
		}
	}
}

// newBody is the event's body, to be read once more (http.Request.GetBody).
func (j *job) newBody() (io.ReadCloser, error) { return &eventBody{b: j.body}, nil }

// eventBody is an attempt's body: the event's bytes, which never change.
type eventBody struct {
	b   []byte
	off int
}

func (e *eventBody) Read(p []byte) (int, error) {
	if e.off >= len(e.b) {
		return 0, io.EOF
	}
	n := copy(p, e.b[e.off:])
	e.off += n
	return n, nil
}

func (e *eventBody) Close() error { return nil }

// Bytes is the whole body, for a transport that sends it without a copy.
func (e *eventBody) Bytes() []byte { return e.b }

// deliver makes the job's first attempt. Each attempt starts on the
// goroutine that calls it and ends in attempted, called with the answer;
// a retry waits on a timer. While a destination speaking h2c holds an
// attempt, and between attempts, the job owns no goroutine (over HTTP/1.1
// an attempt still waits on one).
func (a *Async) deliver(j *job) { a.try(j, 0) }

// try makes attempt number attempt (0 the first) of j.
func (a *Async) try(j *job, attempt int) {
	// Its own context (callctx) costs a held attempt less than
	// context.WithTimeout with the h2c client's hook on it.
	call := new(callctx.Context)
	call.Start(a.ctx, j.c.timeout)
	cancel := call.Cancel
	var ctx context.Context = call
	if j.span.IsValid() {
		ctx = baggage.ContextWithBaggage(trace.ContextWithSpanContext(ctx, j.span), j.bag)
	}
	req, err := http.NewRequestWithContext(ctx, j.method, "", nil)
	if err != nil {
		cancel()
		a.attempted(j, attempt, nil, nil, err)
		return
	}
	target := j.c.dest
	if j.dead != nil && j.dead.sending {
		target = j.dead.url
	}
	req.URL, req.Host = target, target.Host
	if len(j.body) > 0 {
		// The h2c client sends it from the event's bytes (eventBody.Bytes),
		// keeping no copy of its own.
		req.Body, req.GetBody, req.ContentLength = &eventBody{b: j.body}, j.newBody, int64(len(j.body))
	}
	// The transport only reads the headers, unless tracing writes the
	// attempt's trace context into them.
	req.Header = j.header
	if a.p.Tracing != nil {
		req.Header = j.header.Clone()
	}
	t := a.h1
	if a.p.useH2CTo(target) {
		t = a.h2c
	}
	delivery.Start(t, req, func(resp *http.Response, err error) {
		var head []byte
		if err != nil {
			if delivery.Classify(ctx, err) == delivery.TimedOut && a.ctx.Err() == nil {
				err = errors.Join(context.DeadlineExceeded, err)
			}
		} else {
			if j.dead != nil && !j.dead.sending && resp.StatusCode >= 300 {
				// The start of a failure, for knativeerrordata.
				head, _ = io.ReadAll(io.LimitReader(resp.Body, delivery.ErrorDataBytes))
			}
			// The answer comes back for its status and headers only.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
		}
		cancel()
		a.attempted(j, attempt, resp, head, err)
	})
}

// attempted decides what follows attempt number attempt of j, which
// ended with resp (whose body starts with head, when j keeps it) or err:
// the end of the job, its dead-letter sink's turn, or a retry after the
// backoff.
func (a *Async) attempted(j *job, attempt int, resp *http.Response, head []byte, err error) {
	c := j.c
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	switch {
	case err == nil && status < 300 && j.dead != nil && j.dead.sending:
		a.logger.Warnw("Delivered async event to its dead-letter sink", a.eventFields(j, status, attempt+1)...)
		c.metrics.deadLetterEnded(true, j.dead.reason)
		a.finish(j, asyncDeadLettered)
		return
	case err == nil && status < 300:
		a.logger.Debugw("Delivered async event", zap.String("destination", c.dest.Host),
			zap.Int("status", status), zap.Int("attempts", attempt+1))
		a.finish(j, asyncDelivered)
		return
	case a.ctx.Err() != nil:
		a.abandoned(j, status, attempt+1, err)
		return
	case errors.Is(err, delivery.ErrDestinationDenied) || !delivery.RetryableAsync(resp, err) || attempt >= int(j.backoff.Retries):
		if j.dead != nil && !j.dead.sending {
			a.toDeadLetter(j, status, head, attempt+1, err)
			return
		}
		a.logFailure("Async delivery failed", j, status, attempt+1, err)
		if j.dead != nil {
			c.metrics.deadLetterEnded(false, j.dead.reason)
		}
		a.finish(j, asyncFailed)
		return
	}
	var ra time.Duration
	var open *delivery.BreakerOpenError
	switch {
	case resp != nil:
		ra = delivery.RetryAfter(resp.Header, time.Now())
	case errors.As(err, &open):
		ra = open.RetryIn // no attempt before the circuit lets one through
	}
	// Whichever comes first, the timer or Abort, takes the job; each
	// waits for the other to be set up (mu) before it stops it.
	var (
		mu        sync.Mutex
		taken     bool
		timer     *time.Timer
		stopAbort func() bool
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		was := taken
		taken = true
		return !was
	}
	mu.Lock()
	timer = a.afterFunc(j.backoff.Wait(attempt+1, ra), func() {
		if take() {
			stopAbort()
			c.metrics.asyncRetry()
			a.try(j, attempt+1)
		}
	})
	stopAbort = context.AfterFunc(a.ctx, func() {
		if take() {
			timer.Stop()
			a.abandoned(j, status, attempt+1, err)
		}
	})
	mu.Unlock()
}

// finish ends j with outcome: its admission slot and pending count go.
func (a *Async) finish(j *job, outcome asyncOutcome) {
	j.c.metrics.asyncEnded(outcome)
	j.c.metrics.asyncPending(-1)
	a.pending.Add(-1)
	j.c.release()
	a.wg.Done()
}

func (a *Async) abandoned(j *job, status, attempts int, err error) {
	a.logFailure("Abandoned async event at shutdown", j, status, attempts, err)
	a.finish(j, asyncAbandoned)
}

func (a *Async) logFailure(msg string, j *job, status, attempts int, err error) {
	fields := a.eventFields(j, status, attempts)
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	if j.dead != nil && j.dead.sending {
		msg = "Async delivery and its dead-lettering failed"
	}
	a.logger.Errorw(msg, fields...)
}

// eventFields are the log fields of j's event after attempts that ended
// with status; with a dead-letter sink in use, the destination's failure
// too.
func (a *Async) eventFields(j *job, status, attempts int) []any {
	id, source := eventIdentity(j.header, j.body)
	fields := []any{
		zap.String("destination", j.c.dest.Host), zap.String("tenant", j.c.tenant),
		zap.String("ceId", id), zap.String("ceSource", source),
		zap.Int("status", status), zap.Int("attempts", attempts),
	}
	if j.dead != nil && j.dead.sending {
		fields = append(fields, zap.String("deadLetterSink", j.dead.url.Host), zap.String("destinationFailure", j.dead.cause))
	}
	return fields
}

// toDeadLetter sends j's event to its dead-letter sink, with Knative's
// error extensions, after the destination's last failed attempt (status,
// head of its answer, or err), and with retries of its own.
func (a *Async) toDeadLetter(j *job, status int, head []byte, attempts int, err error) {
	j.dead.cause = "status " + strconv.Itoa(status) + " after " + strconv.Itoa(attempts) + " attempts"
	if err != nil {
		j.dead.cause += ": " + err.Error()
	}
	j.dead.reason = delivery.FailureReason(status, err)
	j.header, j.body = delivery.DeadLetterEvent(j.header, j.body, j.c.dest.String(),
		delivery.DeadLetterCode(status), delivery.ErrorData(status, head, err))
	j.dead.sending = true
	a.try(j, 0)
}

// eventIdentity returns the CloudEvent id and source of a binary-mode
// event (Ce-* headers) or a structured one (JSON body), for logs only.
func eventIdentity(h http.Header, body []byte) (id, source string) {
	if id = h.Get("Ce-Id"); id != "" {
		return id, h.Get("Ce-Source")
	}
	var ev struct {
		ID     string `json:"id"`
		Source string `json:"source"`
	}
	if json.Unmarshal(body, &ev) == nil {
		return ev.ID, ev.Source
	}
	return "", ""
}

// Wait returns when every background delivery has ended, or with ctx's
// error.
func (a *Async) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pending is the number of events handed off whose delivery has not ended.
func (a *Async) Pending() int { return int(a.pending.Load()) }

// Abort cancels every background delivery still running; each is logged
// as abandoned. Call Wait afterwards to let them finish logging.
func (a *Async) Abort() { a.abort() }
