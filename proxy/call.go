package proxy

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// call is what the handler chain learns about one request, built once by
// the destination handler and read by the handlers after it.
type call struct {
	dest      *url.URL      // validated destination
	destKey   string        // host:port, the per-destination limit's key
	namespace string        // destination namespace, "" when not a cluster service
	tenant    string        // whom fairness counts this call against
	timeout   time.Duration // deadline of the call to the destination
	async     bool          // Prefer: respond-async

	retries int           // async only: retries after the first attempt
	backoff time.Duration // async only: first retry delay

	body     *guardedBody // the request body, read on the caller's behalf
	ticket   Ticket       // admission slot
	detached bool         // the async worker, or the forwarder's resumed, owns the ticket now

	held      *observation // an HTTP/2 request, whose chain may suspend (observeHandler.hold)
	suspended bool         // the forwarder suspended the call: resumed ends it

	authenticated bool     // a verified caller (auth on)
	caller        Identity // who, when authenticated
	onlyNamespace string   // a caller that may reach only this namespace

	metrics *Metrics  // nil records nothing
	start   time.Time // arrival
	probe   bool      // a probe, not a call: not counted
}

// hold counts the admitted call as held until release.
func (c *call) hold(t Ticket) {
	c.ticket = t
	c.metrics.held(c.namespace, c.tenant, 1)
}

// release gives the admission slot back; exactly once per hold.
func (c *call) release() {
	c.ticket.Release()
	c.metrics.held(c.namespace, c.tenant, -1)
}

// releaseUnlessDetached releases c's slot when the handler that admitted it
// returns, unless the async worker took it over.
func (c *call) releaseUnlessDetached() {
	if !c.detached {
		c.release()
	}
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callOf returns the call of r, which came with w: the one the observe
// handler keeps with its writer, or else (a handler used on its own) the
// one in r's context. Keeping it with the writer spares every call a copy
// of its request (WithContext) for as long as it is held.
func callOf(w http.ResponseWriter, r *http.Request) *call {
	if sw, ok := w.(*statusWriter); ok && sw.c != nil {
		return sw.c
	}
	return callFrom(r.Context())
}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}
