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

package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// answer is what one attempt got back.
type answer struct {
	status int
	header http.Header
	body   []byte         // with readBody
	resp   *http.Response // with openBody: unread, closed by close or by its reader
}

// close releases an open answer that is not handed over.
func (a answer) close() {
	if a.resp != nil {
		drain(a.resp)
	}
}

// keepBody is what an attempt does with the body of its answer.
type keepBody uint8

const (
	// discardBody drains it, so that the connection goes back to its pool.
	discardBody keepBody = iota
	// readBody reads at most MaxReplyBytes of it into answer.body.
	readBody
	// openBody leaves it unread in answer.resp, for a caller that streams
	// it (Forward).
	openBody
	// failureHead reads the start of a failed answer into answer.body (as
	// much as knativeerrordata carries) and drains the rest.
	failureHead
)

// retryableStatus reports whether upstream's CloudEvents HTTP protocol
// retries an answer with status c: 404 (a revision not yet routable), 413,
// 425, 429, 502, 503 and 504. Any other non-2xx status is final.
func retryableStatus(c int) bool {
	switch c {
	case http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusTooEarly,
		http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout:
		return true
	}
	return false
}

func isSuccess(c int) bool { return c >= 200 && c < 300 }

// direct sends m straight to t's sink through the shared pools, retrying
// network errors and retryable answers.
func (s *Sender) direct(ctx context.Context, t Target, m *encoded, res *Result) error {
	s.router.inflight[RouteDirect].Add(1)
	defer s.router.inflight[RouteDirect].Add(-1)
	rt, err := s.pools.forSink(t.URL, t.CACerts)
	if err != nil {
		return undelivered(err)
	}
	sink := t.URL.String()
	tp := &t // the closure below holds a pointer, not a copy, in this frame
	var last http.Header
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !s.retryWait(ctx, RouteDirect, attempt, last) {
			return ctx.Err()
		}
		res.Attempts++
		a, err := s.call(ctx, rt, sink, s.p.Timeout, m, keepDirect(t.Sync), func(h http.Header) error {
			return s.setSinkHeaders(ctx, h, tp)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			res.StatusCode, res.errorHead = 0, nil // this attempt got no answer
			if isToken, _ := asTokenError(err); isToken || attempt >= s.p.Retries {
				return failedDirect(t, res, isToken, err)
			}
			last = nil
			continue
		}
		res.StatusCode = a.status
		if t.Sync {
			res.Header, res.Body = a.header, a.body
		} else {
			res.errorHead = a.body
		}
		if isSuccess(a.status) {
			return nil
		}
		if !retryableStatus(a.status) || attempt >= s.p.Retries {
			return refusedDirect(t, res, a.status)
		}
		last = a.header
	}
}

// failedDirect is the error of a direct send whose last attempt failed
// with err, or that could not get its token. It and refusedDirect keep
// their temporaries out of direct's frame (see prepareAside).
func failedDirect(t Target, res *Result, isToken bool, err error) error {
	if isToken {
		return undelivered(err)
	}
	return fmt.Errorf("%w: %s after %d attempts: %w", ErrUndelivered, t.URL.Redacted(), res.Attempts, err)
}

// undelivered wraps err as a send's failure. Its temporaries stay out of
// the caller's frame (see prepareAside).
func undelivered(err error) error {
	return fmt.Errorf("%w: %w", ErrUndelivered, err)
}

// refusedDirect is the error of a direct send the sink answered with
// status, which is not a success, for the last time.
func refusedDirect(t Target, res *Result, status int) error {
	return fmt.Errorf("%w: %s answered %d after %d attempts", ErrUndelivered, t.URL.Redacted(), status, res.Attempts)
}

// setSinkHeaders adds what the sink gets besides the event: Kn-Namespace
// and, with OIDC, the source's token for the sink's audience. t is a
// pointer: a copy would sit in the frame of every held direct send.
func (s *Sender) setSinkHeaders(ctx context.Context, h http.Header, t *Target) error {
	if t.Namespace != "" {
		h.Set(delivery.HeaderNamespace, t.Namespace)
	}
	if s.tokens == nil || t.Audience == "" || t.ServiceAccount == "" {
		return nil
	}
	tok, err := s.tokens.Token(ctx, ServiceAccount{Namespace: t.Namespace, Name: t.ServiceAccount}, t.Audience)
	if err != nil {
		return tokenError{err: fmt.Errorf("token of %s/%s for the sink: %w", t.Namespace, t.ServiceAccount, err)}
	}
	h.Set("Authorization", "Bearer "+tok.Value)
	return nil
}

// tokenError marks a failure to get a token, before anything was sent;
// proxy when the token was the proxy's.
type tokenError struct {
	err   error
	proxy bool
}

func (e tokenError) Error() string { return e.err.Error() }
func (e tokenError) Unwrap() error { return e.err }

// asTokenError reports whether err is a tokenError, and whether the token
// was the proxy's.
func asTokenError(err error) (isToken, forProxy bool) {
	var te tokenError
	if errors.As(err, &te) {
		return true, te.proxy
	}
	return false, false
}

// keepFor is how a Send keeps its answers: read for a Sync send, whose
// Result carries the reply, and discarded otherwise.
func keepFor(sync bool) keepBody {
	if sync {
		return readBody
	}
	return discardBody
}

// keepDirect is how a direct send keeps its answers: as keepFor, but the
// start of a failed answer is kept for knativeerrordata, should the event
// be dead-lettered.
func keepDirect(sync bool) keepBody {
	if sync {
		return readBody
	}
	return failureHead
}

// call makes one attempt: a POST of m to u through rt within timeout, with
// the headers setHeaders adds. What it does with the answer's body is keep.
func (s *Sender) call(ctx context.Context, rt http.RoundTripper, u string, timeout time.Duration, m *encoded,
	keep keepBody, setHeaders func(http.Header) error) (answer, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	req, err := m.request(actx, u)
	if err == nil {
		err = setHeaders(req.Header)
	}
	var resp *http.Response
	if err == nil {
		resp, err = rt.RoundTrip(req)
	}
	if err != nil {
		cancel()
		return answer{}, err
	}
	if keep == openBody {
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return answer{status: resp.StatusCode, header: resp.Header, resp: resp}, nil
	}
	defer cancel()
	return s.readAnswer(actx, resp, keep), nil
}

// cancelOnClose ends an open answer's deadline once its reader is done.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// drain reads what is left of resp's body, up to 64 KiB, and closes it, so
// that its connection goes back to its pool.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// readAnswer reads and closes resp's body, keeping what keep says.
func (s *Sender) readAnswer(ctx context.Context, resp *http.Response, keep keepBody) answer {
	a := answer{status: resp.StatusCode, header: resp.Header}
	if keep == failureHead && !isSuccess(resp.StatusCode) {
		a.body, _ = io.ReadAll(io.LimitReader(resp.Body, delivery.ErrorDataBytes))
	}
	if keep != readBody {
		drain(resp)
		return a
	}
	defer resp.Body.Close()
	var err error
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, s.p.MaxReplyBytes))
	if err != nil && ctx.Err() == nil {
		// The answer's status counts; a cut body only loses the reply.
		s.p.Logger.Debugw("Reading the answer's body", "error", err)
	}
	return a
}
