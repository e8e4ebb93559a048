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
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
)

// answer streams resp, the destination's answer, to the caller. The head
// goes out with the first part of the body: a destination that breaks off
// before any byte of its body came has had nothing of its answer passed
// on, and the caller gets 502 unreachable (or what failureReason says, as
// for a call with no answer). A break after that aborts the caller's
// answer once what came is flushed, so that the caller sees it broken
// (fewer bytes than the declared length, chunks without the last, an
// HTTP/2 stream reset), never a short body that looks complete; it is
// logged (observeHandler.record) with the event's id. WriteHeader puts
// nothing on the wire in either server (the first Write or Flush does),
// so waiting for the first part delays no head a caller would have seen.
func (f *forwarder) answer(w http.ResponseWriter, out *http.Request, c *call, resp *http.Response) {
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		writeError(w, ReasonUnreachable, "the destination switched protocols, which the proxy never asks for")
		return
	case resp.StatusCode < 100 || resp.StatusCode > 999:
		// net/http's transport passes any three digits on; written back,
		// such a status would panic the server.
		writeError(w, ReasonUnreachable, "the destination answered with status "+strconv.Itoa(resp.StatusCode)+", which is not an HTTP status")
		return
	}
	buf := copyBufferPool.Get().(*[copyBufferSize]byte)
	defer copyBufferPool.Put(buf)
	n, rerr := readSome(resp.Body, buf[:])
	if n == 0 && rerr != nil && !errors.Is(rerr, io.EOF) {
		f.fail(w, out, c, fmt.Errorf("the answer of %s broke off before its body: %w", c.dest.Host, rerr))
		return
	}
	removeHopByHop(resp.Header)
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	if _, ok := h["Content-Type"]; !ok {
		// net/http would sniff one from the body: the caller gets the
		// destination's headers alone. A nil value stops the sniffing.
		h["Content-Type"] = nil
	}
	w.WriteHeader(resp.StatusCode)
	if err := copyAnswer(w, resp, buf, n, rerr); err != nil {
		// What was written goes out before the abort, the head with it:
		// the caller sees a broken answer, not none.
		_ = http.NewResponseController(w).Flush()
		c.brokeOff = err
		panic(http.ErrAbortHandler)
	}
	// Trailers the destination did not announce come too: the prefix
	// sends any of them.
	for k, v := range resp.Trailer {
		h[http.TrailerPrefix+k] = v
	}
}

// readSome reads into p until it has bytes or an error.
func readSome(r io.Reader, p []byte) (int, error) {
	for {
		n, err := r.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// copyAnswer writes the n bytes of buf that came first (with rerr, their
// read's error), then copies the rest of resp's body through buf, flushing
// after every write when the answer streams (no declared length, or
// server-sent events), as a client waiting for each part expects.
func copyAnswer(w http.ResponseWriter, resp *http.Response, buf *[copyBufferSize]byte, n int, rerr error) error {
	var flush func() error
	if resp.ContentLength == -1 || isEventStream(resp.Header) {
		flush = http.NewResponseController(w).Flush
	}
	for {
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if flush != nil {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
		n, rerr = resp.Body.Read(buf[:])
	}
}

func isEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

// headerHasToken reports whether a comma-separated list in vals holds tok.
func headerHasToken(vals []string, tok string) bool {
	for _, v := range vals {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), tok) {
				return true
			}
		}
	}
	return false
}

// errShuttingDown is the cause of calls cut at the drain deadline.
var errShuttingDown = errors.New("the proxy shut down before the destination answered")

// fail answers a call that got no response from its destination.
func (f *forwarder) fail(w http.ResponseWriter, out *http.Request, c *call, err error) {
	reason := failureReason(out.Context(), f.p.Stop, c, err)
	if reason == "" {
		f.logger.Debugw("Caller went away", zap.String("destination", c.dest.Host), zap.Error(err))
		closeWithoutAnswer(w)
		return
	}
	var open *delivery.BreakerOpenError
	if reason == ReasonDestinationBusy && errors.As(err, &open) {
		// Retry when the circuit lets a probe through, not sooner.
		writeErrorRetryIn(w, reason, failureMessage(reason, c, err), open.RetryIn)
		return
	}
	writeError(w, reason, failureMessage(reason, c, err))
}

// closeWithoutAnswer closes an HTTP/1.1 caller's connection with no
// answer. net/http takes a caller that half-closes its side for one that
// left, and answers 200 with no body for a handler that wrote nothing: a
// caller still reading would take that for its event delivered. An HTTP/2
// caller that left has reset its stream, so nothing is written to it.
func closeWithoutAnswer(w http.ResponseWriter) {
	if nc, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = nc.Close()
	}
}

// failureReason classifies why a call got no response; "" when the caller
// went away and nobody is listening.
func failureReason(ctx, stop context.Context, c *call, err error) Reason {
	switch {
	case c.body != nil && c.body.tooLarge.Load():
		return ReasonBodyTooLarge
	case c.body != nil && c.body.stalled.Load():
		return ReasonBadRequest
	case c.body != nil && c.body.malformed.Load() && ctx.Err() == nil:
		return ReasonBadRequest
	case errors.Is(err, delivery.ErrDestinationDenied):
		return ReasonDestinationDenied
	case errors.Is(err, delivery.ErrBreakerOpen):
		return ReasonDestinationBusy
	case ctx.Err() != nil && stop != nil && errors.Is(context.Cause(stop), errShuttingDown):
		return ReasonDraining
	}
	switch delivery.Classify(ctx, err) {
	case delivery.TimedOut:
		return ReasonTimeout
	case delivery.CallerGone:
		return ""
	default:
		return ReasonUnreachable
	}
}

func failureMessage(reason Reason, c *call, err error) string {
	switch reason {
	case ReasonTimeout:
		return "no response from " + c.dest.Host + " within " + c.timeout.String()
	case ReasonDraining:
		return errShuttingDown.Error() + "; retry on another instance"
	case ReasonBadRequest:
		if c.body.malformed.Load() {
			return "the request body could not be read: " + err.Error()
		}
		return c.body.stallMessage()
	case ReasonBodyTooLarge:
		return "the body is larger than the " + strconv.FormatInt(c.body.lim.max, 10) + " bytes allowed"
	default:
		return err.Error()
	}
}

// copyBufferPool lends the answers' copies 32 KiB buffers, so that a held
// call owns no buffer while it waits.
const copyBufferSize = 32 << 10

var copyBufferPool = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}
