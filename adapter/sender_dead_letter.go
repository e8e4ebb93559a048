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
	"math"
	"net/http"
	"net/url"
	"strconv"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// deliverySpec is what a Knative delivery spec would say of every send,
// from the SenderParams and config-event-forwarding: the retries' backoff
// and the default dead-letter sink.
type deliverySpec struct {
	backoff    delivery.Backoff
	deadLetter *url.URL // nil: none
}

// deliverySpecFor combines the SenderParams with c's delivery keys.
func (s *Sender) deliverySpecFor(c config.Forwarding) *deliverySpec {
	p := &s.p
	b := delivery.Backoff{Retries: int32(min(p.Retries, math.MaxInt32)), Delay: p.BackoffDelay, Max: p.BackoffMax,
		MaxRetryAfter: p.MaxRetryAfter, Rand: p.Rand, Linear: c.LinearBackoff, IgnoreRetryAfter: c.IgnoreRetryAfter}
	if c.RetryAfterMax > 0 {
		b.MaxRetryAfter = c.RetryAfterMax
	}
	return &deliverySpec{backoff: b, deadLetter: c.DeadLetterSink}
}

// deadLetterFor is t's dead-letter sink: its own, or the install's; nil
// for none, and for a Sync send.
func (s *Sender) deadLetterFor(t Target) *url.URL {
	switch {
	case t.Sync:
		return nil
	case t.DeadLetter != nil:
		return t.DeadLetter
	}
	return s.spec.Load().deadLetter
}

// setDeliveryHeaders adds, to an async hand-off for t, how the proxy is
// to retry the sink and where the event goes if it fails for good: what
// this Sender would do itself.
func (s *Sender) setDeliveryHeaders(h http.Header, t Target) {
	spec := s.spec.Load()
	b := &spec.backoff
	h.Set(delivery.HeaderForwardRetry, strconv.FormatInt(int64(b.Retries), 10))
	h.Set(delivery.HeaderForwardBackoffDelay, delivery.FormatDuration(b.Delay))
	if b.Linear {
		h.Set(delivery.HeaderForwardBackoffPolicy, "linear")
	}
	if b.IgnoreRetryAfter {
		h.Set(delivery.HeaderForwardRetryAfterMax, "PT0S")
	} else {
		h.Set(delivery.HeaderForwardRetryAfterMax, delivery.FormatDuration(b.RetryAfterCap()))
	}
	if dls := s.deadLetterFor(t); dls != nil {
		h.Set(delivery.HeaderForwardDeadLetterTo, dls.String())
	}
}

// deadLetterFailed sends m, whose send to t failed with err, to its
// dead-letter sink, if it has one and the failure is the sink's; it
// returns the send's error then (nil once dead-lettered), or err.
//
// Not inlined, so that its temporaries stay out of Send's frame, which
// every held send keeps (see prepare).
//
//go:noinline
func (s *Sender) deadLetterFailed(ctx context.Context, t Target, m *encoded, res *Result, err error) error {
	if !errors.Is(err, ErrUndelivered) || ctx.Err() != nil {
		return err
	}
	if dls := s.deadLetterFor(t); dls != nil {
		return s.deadLetter(ctx, t, dls, m, res, err)
	}
	return err
}

// deadLetter sends m, which t's sink failed for the last time with cause
// (res has its last status and the start of its answer), to dls as
// eventing's dispatcher would: with Knative's error extensions, and
// retries of its own. It returns nil when dls took the event, and
// otherwise an error naming both failures. The dead-letter sink gets no
// token: the source's was for its sink.
func (s *Sender) deadLetter(ctx context.Context, t Target, dls *url.URL, m *encoded, res *Result, cause error) error {
	status := res.StatusCode
	reason := delivery.FailureReason(status, cause)
	h, body := delivery.DeadLetterEvent(m.header, m.body, t.URL.String(),
		delivery.DeadLetterCode(status), delivery.ErrorData(status, res.errorHead, cause))
	dres := &Result{}
	err := s.direct(ctx, Target{URL: dls, Namespace: t.Namespace}, &encoded{header: h, body: body}, dres)
	res.Attempts += dres.Attempts
	s.metrics.deadLettered(ctx, err == nil, reason)
	if err != nil {
		return fmt.Errorf("%w; then the dead-letter sink: %w", cause, err)
	}
	res.DeadLettered = true
	s.p.Logger.Warnw("Event sent to its dead-letter sink", zap.String("sink", t.URL.Redacted()),
		zap.String("deadLetterSink", dls.Redacted()), zap.String("namespace", t.Namespace),
		zap.String("id", m.header.Get("Ce-Id")), zap.String("source", m.header.Get("Ce-Source")),
		zap.Int("status", status), zap.String("reason", reason), zap.Error(cause))
	return nil
}
