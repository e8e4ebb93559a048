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
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// headerSpreadOffer marks an async call one pod offers another: its value
// is how many calls the offering pod holds, this one included. Like every
// Kn-Forward-* header it never reaches a destination.
const headerSpreadOffer = "Kn-Forward-Spread-Offer"

// SpreadParams configure how a pod that holds many calls offers new async
// hand-offs to the other pods of its revision.
type SpreadParams struct {
	// URL reaches one pod of the revision, picked afresh for each
	// connection (the revision's private Service: kube-proxy picks a pod
	// per connection), through its queue-proxy.
	URL string
	// Above: an async call admitted while the pod holds more calls than
	// this is offered to another pod before it is kept. 0 is off.
	Above int
	// Timeout bounds one offer; past it the pod keeps the call.
	Timeout time.Duration
}

// Spreader offers async hand-offs to other pods of the revision when its
// pod holds more calls than SpreadParams.Above. An ingress that reuses its
// connections to a revision's ClusterIP sends most hand-offs to the few
// pods those connections reached, whatever the others hold; a new pod the
// autoscaler adds gets none until the ingress opens new connections. Each
// offer opens a new connection, so kube-proxy picks a pod for it at
// random; that pod takes the call only if it holds fewer than the
// offering pod (the better of two random choices), else it declines and
// the offering pod keeps the call. A call
// taken elsewhere is answered 202 by the pod that took it, which owns its
// delivery; nothing is lost when an offer fails, since the offering pod
// still has the event. Only an answer lost after the other pod took the
// call leaves two pods delivering it: at least once, as async delivery is.
type Spreader struct {
	p      SpreadParams
	url    *url.URL   // p.URL
	held   func() int // calls the pod holds now
	client *http.Client
	logger *zap.SugaredLogger
	// lastFailure rate-limits the warning about failed offers (unix ns).
	lastFailure atomic.Int64
}

// NewSpreader returns the spreader of p; held counts the pod's calls.
func NewSpreader(p SpreadParams, held func() int, logger *zap.SugaredLogger) (*Spreader, error) {
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("spread URL %q: want an absolute http URL", p.URL)
	}
	dialer := &net.Dialer{Timeout: p.Timeout}
	return &Spreader{
		p: p, url: u, held: held, logger: logger,
		client: &http.Client{
			Transport: &http.Transport{
				// A connection per offer: each picks its pod anew.
				DisableKeepAlives:      true,
				DialContext:            dialer.DialContext,
				MaxResponseHeaderBytes: 64 << 10,
				ResponseHeaderTimeout:  p.Timeout,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// offer offers the async call r, whose body was read into body, to
// another pod while this one holds more than Above calls; it reports
// whether one took it. It runs before the call's headers are edited:
// the other pod reads them as this one did.
func (s *Spreader) offer(ctx context.Context, r *http.Request, body []byte) bool {
	held := s.held()
	if held <= s.p.Above {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, s.p.Timeout)
	defer cancel()
	h := r.Header.Clone()
	removeHopByHop(h)
	h.Set(headerSpreadOffer, strconv.Itoa(held))
	// The address is the operator's (FORWARD_SPREAD_URL), parsed once.
	req := (&http.Request{
		Method: r.Method, URL: s.url, Host: s.url.Host, Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}).WithContext(ctx)
	resp, err := s.client.Do(req)
	if err != nil {
		s.failed(err)
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusAccepted
}

// failed logs an offer that had no answer, once a minute at most: the
// call stays where it is, so nothing is lost.
func (s *Spreader) failed(err error) {
	now := time.Now().UnixNano()
	last := s.lastFailure.Load()
	if now-last < int64(time.Minute) || !s.lastFailure.CompareAndSwap(last, now) {
		return
	}
	s.logger.Warnw("Offering an async call to another pod failed; this pod keeps it",
		zap.String("url", s.p.URL), zap.Error(err))
}

// spreadOffer is the value of r's Kn-Forward-Spread-Offer header: the
// calls the offering pod holds, or 0 when r is no offer (or says nothing
// a pod could have sent).
func spreadOffer(r *http.Request) int32 {
	v := r.Header.Get(headerSpreadOffer)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 1 {
		return 0
	}
	return int32(n)
}

// declinesOffer reports whether a pod holding held calls declines an
// offer from one that holds offeredBy, this call included: taking it
// must leave the two closer, not further apart.
func declinesOffer(held int, offeredBy int32) bool {
	return held+1 >= int(offeredBy)
}
