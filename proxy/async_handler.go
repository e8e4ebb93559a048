package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
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
// retries since the caller is gone. The call keeps its admission slot
// until its last attempt ends. Every call that finally fails, or that is
// abandoned at shutdown, is logged with its destination and event.
type Async struct {
	p       AsyncParams
	h1, h2c http.RoundTripper
	logger  *zap.SugaredLogger
	ctx     context.Context // cancelled by Abort
	abort   context.CancelFunc
	wg      sync.WaitGroup
}

// NewAsync returns the async hand-off handler.
func NewAsync(p AsyncParams, logger *zap.SugaredLogger) *Async {
	p.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	a := &Async{p: p, logger: logger, ctx: ctx, abort: cancel}
	a.h1, a.h2c = p.roundTrippers()
	return a
}

// job is one event being delivered in the background.
type job struct {
	c       *call
	method  string
	header  http.Header
	body    []byte
	http2   bool              // the caller came over HTTP/2
	span    trace.SpanContext // the call's server span: parent of the attempts
	bag     baggage.Baggage
	backoff delivery.Backoff
}

func (a *Async) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callFrom(r.Context())
	body, err := readBody(w, r, a.p.MaxEventBytes, a.p.BodyIdleTimeout)
	switch {
	case errors.Is(err, errBodyStalled):
		writeError(w, ReasonBadRequest, "no byte of the request body came for "+a.p.BodyIdleTimeout.String())
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
		http2: r.ProtoMajor == 2,
		span:  trace.SpanContextFromContext(r.Context()),
		bag:   baggage.FromContext(r.Context()),
		backoff: delivery.Backoff{
			Retries: c.retries, Delay: c.backoff,
			Max: a.p.MaxBackoff, MaxRetryAfter: a.p.MaxRetryAfter,
		},
	}
	c.detached = true
	c.metrics.asyncPending(1)
	a.wg.Add(1)
	go a.deliver(j)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
}

// readBody reads a whole request body of at most limit bytes, failing
// when it stalls for idle.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, idle time.Duration) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body := newGuardedBody(w, r.Body, limit, idle)
	defer body.Close()
	if r.ContentLength > 0 && r.ContentLength <= limit {
		// Exactly the declared bytes, then the end: what an event held for
		// retries costs is its own size.
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		if n, err := body.Read(make([]byte, 1)); n > 0 || err != nil && err != io.EOF {
			return nil, cmp.Or(err, errors.New("the body is longer than its Content-Length"))
		}
		return b, nil
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (a *Async) deliver(j *job) {
	defer a.wg.Done()
	c := j.c
	defer c.metrics.asyncPending(-1)
	defer c.release()
	var (
		status  int
		lastErr error
	)
	for attempt := 0; ; attempt++ {
		resp, err := a.attempt(j)
		status, lastErr = 0, err
		if resp != nil {
			status = resp.StatusCode
		}
		if err == nil && status < 300 {
			a.logger.Debugw("Delivered async event", zap.String("destination", c.dest.Host),
				zap.Int("status", status), zap.Int("attempts", attempt+1))
			c.metrics.asyncEnded(asyncDelivered)
			return
		}
		if a.ctx.Err() != nil {
			a.abandoned(j, status, attempt+1, lastErr)
			return
		}
		if errors.Is(err, delivery.ErrDestinationDenied) || !delivery.RetryableAsync(resp, err) || attempt >= j.backoff.Retries {
			a.logFailure("Async delivery failed", j, status, attempt+1, lastErr)
			c.metrics.asyncEnded(asyncFailed)
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
		t := time.NewTimer(j.backoff.Wait(attempt+1, ra))
		select {
		case <-t.C:
		case <-a.ctx.Done():
			t.Stop()
			a.abandoned(j, status, attempt+1, lastErr)
			return
		}
		c.metrics.asyncRetry()
	}
}

func (a *Async) abandoned(j *job, status, attempts int, err error) {
	a.logFailure("Abandoned async event at shutdown", j, status, attempts, err)
	j.c.metrics.asyncEnded(asyncAbandoned)
}

// attempt makes one call and drains and closes the response body; the
// response comes back for its status and headers only.
func (a *Async) attempt(j *job) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(a.ctx, j.c.timeout)
	defer cancel()
	if j.span.IsValid() {
		ctx = baggage.ContextWithBaggage(trace.ContextWithSpanContext(ctx, j.span), j.bag)
	}
	req, err := http.NewRequestWithContext(ctx, j.method, "", bytes.NewReader(j.body))
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = j.c.dest, j.c.dest.Host
	// The transport only reads the headers, unless tracing writes the
	// attempt's trace context into them.
	req.Header = j.header
	if a.p.Tracing != nil {
		req.Header = j.header.Clone()
	}
	t := a.h1
	if a.p.useH2C(ctx, j.http2, j.c) {
		t = a.h2c
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		if delivery.Classify(ctx, err) == delivery.TimedOut && a.ctx.Err() == nil {
			err = errors.Join(context.DeadlineExceeded, err)
		}
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return resp, nil
}

func (a *Async) logFailure(msg string, j *job, status, attempts int, err error) {
	id, source := eventIdentity(j.header, j.body)
	fields := []any{
		zap.String("destination", j.c.dest.Host), zap.String("tenant", j.c.tenant),
		zap.String("ceId", id), zap.String("ceSource", source),
		zap.Int("status", status), zap.Int("attempts", attempts),
	}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	a.logger.Errorw(msg, fields...)
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

// Abort cancels every background delivery still running; each is logged
// as abandoned. Call Wait afterwards to let them finish logging.
func (a *Async) Abort() { a.abort() }
