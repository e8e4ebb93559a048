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
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/internal/callctx"
)

// ForwardParams configure how calls reach their destinations.
type ForwardParams struct {
	// Transports reach destinations. Required.
	Transports *delivery.Transports
	// Protocol is config.ProtocolAuto (h2c to the plain-http destinations
	// H2CHosts names, HTTP/1.1 to the others), ProtocolHTTP1 or
	// ProtocolH2C (every plain-http destination). If empty, auto.
	Protocol string
	// H2CHosts are the host patterns (FORWARD_H2C_HOSTS) of the
	// destinations auto speaks h2c to. If empty, none.
	H2CHosts []string
	// MaxEventBytes bounds bodies of unknown length. If zero, 4 MiB.
	MaxEventBytes int64
	// LoopID is written into CDN-Loop. If empty, DefaultLoopID.
	LoopID string
	// BodyIdleTimeout fails a request whose body stops coming for this
	// long. If zero, 30 s.
	BodyIdleTimeout time.Duration
	// BodyMinRate fails a request whose body comes slower than this many
	// bytes a second, on average over the time the proxy waits for it
	// past a first BodyIdleTimeout (guardedBody). If zero, no minimum.
	BodyMinRate int64
	// Stop, when done, cuts every synchronous call still held; its cause
	// decides the answer (errShuttingDown: 503 draining). If nil, never.
	// A request whose context carries Stop under stopScope (the proxy's
	// BaseContext) is cut by Stop directly.
	Stop context.Context
	// Tracing makes a client span of every attempt. If nil, none.
	Tracing trace.TracerProvider
}

// roundTrippers returns the HTTP/1.1 and h2c transports, traced when
// tracing is on.
func (p *ForwardParams) roundTrippers() (h1, h2c http.RoundTripper) {
	return delivery.TraceTransport(p.Transports.HTTP1, p.Tracing, propagator),
		delivery.TraceTransport(p.Transports.H2C, p.Tracing, propagator)
}

func (p *ForwardParams) defaults() {
	if p.Protocol == "" {
		p.Protocol = config.ProtocolAuto
	}
	if p.MaxEventBytes <= 0 {
		p.MaxEventBytes = 4 << 20
	}
	if p.LoopID == "" {
		p.LoopID = DefaultLoopID
	}
	if p.BodyIdleTimeout <= 0 {
		p.BodyIdleTimeout = 30 * time.Second
	}
}

// bodyLimits are what a request body is held to.
func (p *ForwardParams) bodyLimits() bodyLimits {
	return bodyLimits{max: p.MaxEventBytes, idle: p.BodyIdleTimeout, minRate: p.BodyMinRate}
}

// useH2C reports whether call c goes out over h2c. Only plain-http
// destinations can; in auto mode, those H2CHosts names. Whatever protocol
// the caller came with: a plain HTTP/1.1 sink gets HTTP/1.1 behind an h2c
// caller, and nothing is sent to it that its caller did not send.
func (p *ForwardParams) useH2C(c *call) bool { return p.useH2CTo(c.dest) }

// useH2CTo reports whether a call to dest speaks h2c.
func (p *ForwardParams) useH2CTo(dest *url.URL) bool {
	switch p.Protocol {
	case config.ProtocolH2C:
		return dest.Scheme == "http"
	case config.ProtocolAuto:
		return delivery.H2CTo(dest, p.H2CHosts)
	default:
		return false
	}
}

// NewForwardHandler forwards a synchronous call and streams the
// destination's answer back: method, body and end-to-end headers as they
// came, hop-by-hop and Kn-Forward-* headers stripped, status, headers,
// body and trailers of the answer unchanged. It never retries: the caller
// owns retries.
//
// It is a reverse proxy written for calls that are held for minutes: the
// outbound request is the inbound one, shallow-copied once, with its
// headers edited in place (no clone), and while the call waits for its
// answer it owns no buffer, no timer but its deadline, and a stack as
// shallow as the handler chain allows.
func NewForwardHandler(p ForwardParams, logger *zap.SugaredLogger) http.Handler {
	p.defaults()
	f := &forwarder{p: p, logger: logger}
	f.h1, f.h2 = p.roundTrippers()
	f.starter, _ = f.h2.(delivery.Starter)
	return f
}

type forwarder struct {
	p       ForwardParams
	logger  *zap.SugaredLogger
	h1, h2  http.RoundTripper
	starter delivery.Starter // h2, when it can start a call without waiting for it
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := f.begin(w, r)
	switch {
	case x.c.held != nil && x.h2c && f.starter != nil:
		f.suspend(w, x)
		return
	case x.c.held != nil:
		f.handOff(w, x)
		return
	}
	defer f.end(x)
	resp, err := x.roundTrip()
	// From here on the caller is written to: a caller that stopped
	// reading must not hold the call once it is over.
	x.stalled = releaseStalledCaller(x.out.Context(), w)
	if err != nil {
		f.fail(w, x.out, x.c, err)
		return
	}
	f.answer(w, x.out, x.c, resp)
}

// roundTrip sends x's call and waits for the answer.
func (x *forwarding) roundTrip() (*http.Response, error) {
	if x.h2c {
		return x.f.h2.RoundTrip(x.out)
	}
	if err := x.f.preread(x.out, x.c); err != nil {
		return nil, err
	}
	return x.f.h1.RoundTrip(x.out)
}

// suspend starts a held HTTP/2 request's call (observeHandler.hold) and
// returns: the chain's goroutine ends while the destination holds the
// call, which then owns no goroutine but the caller's stream's. resumed
// writes the answer.
func (f *forwarder) suspend(w http.ResponseWriter, x *forwarding) {
	x.outlive(w, suspended)
	f.starter.Go(x.out, x.resumed)
}

// handOff leaves a held HTTP/2 request's call that must wait on a
// goroutine (an HTTP/1.1 destination) to a fresh one, which
// observeHandler.settle starts once the chain is done: the call waits on a
// stack the chain never deepened.
func (f *forwarder) handOff(w http.ResponseWriter, x *forwarding) {
	x.outlive(w, handedOff)
	x.c.held.handoff = x.wait
}

// outlive hands x's call from the chain to resumed (suspend, handOff),
// which gives the admission slot back and writes to w.
func (x *forwarding) outlive(w http.ResponseWriter, p phase) {
	x.w = w
	x.c.leave(p)
}

// wait runs a handed-off call on the goroutine settle started for it.
func (x *forwarding) wait() {
	x.resumed(x.roundTrip())
}

// resumed answers a call that outlived the chain, on the goroutine that
// got its answer (the one settle started, for a call handed off), then ends the
// request (observation.resumed).
func (x *forwarding) resumed(resp *http.Response, err error) {
	defer x.c.held.resumed()
	defer x.f.end(x)
	x.stalled = releaseStalledCaller(x.out.Context(), x.w)
	if err != nil {
		x.f.fail(x.w, x.out, x.c, err)
		return
	}
	x.f.answer(x.w, x.out, x.c, resp)
}

// forwarding is one synchronous call in the forwarder: what its end
// undoes. It lives on the heap rather than in ServeHTTP's frame, which is
// on the way to the call's deepest point (docs/benchmarks.md).
type forwarding struct {
	// ctx is the call's context, in this record rather than one of its
	// own (callctx: a held call's cheapest).
	ctx     callctx.Context
	out     *http.Request // the request to the destination
	c       *call
	h2c     bool
	stop    func() bool // unregisters the drain deadline's cancel; nil without one
	stalled func()      // clears the stalled-caller guard; nil before the answer

	f *forwarder          // for what runs after ServeHTTP returned (outlive)
	w http.ResponseWriter // the caller of a call that outlives the chain
}

// begin sets up the call's context, whose deadline is the call's and which
// the drain deadline (f.p.Stop) and the caller leaving cancel too, and the
// request to the destination.
func (f *forwarder) begin(w http.ResponseWriter, r *http.Request) *forwarding {
	c := callOf(w, r)
	x := &forwarding{c: c, f: f}
	x.ctx.Start(r.Context(), c.timeout)
	if f.p.Stop != nil && r.Context().Value(stopScope{}) != f.p.Stop {
		x.stop = context.AfterFunc(f.p.Stop, x.ctx.Cancel)
	}
	x.out = r.WithContext(&x.ctx)
	x.h2c = f.p.useH2C(c)
	f.outbound(x.out, c, w)
	return x
}

// end undoes begin once the handler returns. The transport may still read
// the body then; closed, it reads nothing more of the caller.
func (f *forwarder) end(x *forwarding) {
	if x.stalled != nil {
		x.stalled()
	}
	if x.c.body != nil {
		_ = x.c.body.Close()
	}
	if x.stop != nil {
		x.stop()
	}
	x.ctx.Cancel()
}

// preReadMax is the largest declared body read before an HTTP/1.1 call
// starts. A body that streams costs the transport a write of its own for
// the headers and then one per part; a small body read first goes out with
// the headers in one write, which on loopback is a sixth of the proxy's CPU
// per call. Events are small; larger bodies still stream.
const preReadMax = 16 << 10

// preread reads a small body of declared length before out goes out over
// net/http's transport to an https destination (see preReadMax). The bytes
// then belong to the call until it ends, as the transport keeps the
// request. Plain-http destinations need none of it: delivery's HTTP/1.1
// and h2c transports read such a body ahead themselves (h2c keeps it, so
// that a stream the destination refuses can go out again).
func (f *forwarder) preread(out *http.Request, c *call) error {
	if c.body == nil || out.ContentLength <= 0 || out.ContentLength > preReadMax || out.URL.Scheme == "http" {
		return nil
	}
	b := make([]byte, out.ContentLength)
	if _, err := io.ReadFull(c.body, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("the body ended before its declared %d bytes: %w", out.ContentLength, err)
		}
		return err
	}
	out.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// outbound turns out, a shallow copy of the inbound request, into the
// request to the destination. Its header map is the inbound one, edited in
// place: the server reads nothing of it once the handler runs, except the
// keep-alive wish of an HTTP/1.0 caller, whose headers are copied instead.
func (f *forwarder) outbound(out *http.Request, c *call, w http.ResponseWriter) {
	out.URL = c.dest
	out.Host = ""
	out.RequestURI = ""
	out.Close = false
	if !out.ProtoAtLeast(1, 1) {
		out.Header = out.Header.Clone()
	}
	h := out.Header
	trailers := headerHasToken(h["Te"], "trailers")
	removeHopByHop(h)
	removeForwardHeaders(h)
	if trailers {
		h["Te"] = teTrailers
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUserAgent // not Go's default
	}
	loop := h[cdnLoopKey]
	h[cdnLoopKey] = append(loop[:len(loop):len(loop)], f.p.LoopID) // never into a slice shared with another header
	switch {
	case out.ContentLength == 0:
		out.Body = nil
	case out.Body != nil && out.Body != http.NoBody:
		c.body = newGuardedBody(w, out.Body, f.p.bodyLimits())
		out.Body = c.body
	}
}

var (
	cdnLoopKey  = http.CanonicalHeaderKey(headerCDNLoop)
	teTrailers  = []string{"trailers"}
	noUserAgent = []string{""}
)
