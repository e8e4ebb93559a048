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

// Package forwarding makes any CloudEvents SDK client forward through the
// event-forwarding proxy with one option. Option decorates the client's
// round tripper with an adapter.Sender: while the Sender's Router
// forwards (config-event-forwarding names a proxy and the adapter serves
// more sources than its threshold), each request goes to the proxy with
// Kn-Forward-To, and comes back as the sink's answer or the proxy's 202;
// otherwise, and whenever the proxy is down or refuses the event, the
// client's own round tripper sends it, as it would have without the
// option.
//
// A source on knative.dev/eventing/pkg/adapter/v2 adds it to the client
// configuration the shared main built:
//
//	sender := adapter.NewSender(adapter.SenderParams{Logger: logger})
//	cfg := adapterv2.GetClientConfig(ctx)
//	cfg.Options = append(cfg.Options, forwarding.Option(sender))
//	client, err := adapterv2.NewClient(cfg)
//
// and feeds the Sender as any adapter does: kube.WatchForwarding for the
// ConfigMap, SetDirectSources with the number of sources it serves.
package forwarding

import (
	"context"
	"net/http"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"knative.dev/event-forwarding-proxy/adapter"
)

// Setting tunes Option and Decorator.
type Setting func(*settings)

type settings struct{ opts adapter.ForwardOptions }

// Sync holds every call through the proxy until the sink answers, for a
// client that wants the sink's reply (Request rather than Send). Without
// it the proxy takes each event with 202; WithSync marks single calls.
func Sync() Setting { return func(s *settings) { s.opts.Sync = true } }

// HTTPS lets https sinks go through the proxy. Set it only when the proxy
// trusts the CA that signed them; otherwise https sinks go direct.
func HTTPS() Setting { return func(s *settings) { s.opts.HTTPS = true } }

// Option is the CloudEvents SDK HTTP option that forwards through s.
func Option(s *adapter.Sender, with ...Setting) cehttp.Option {
	return cehttp.WithRoundTripperDecorator(Decorator(s, with...))
}

// Decorator wraps a round tripper so that it forwards through s; Option
// hands it to the SDK, and any other HTTP client can use it as is.
func Decorator(s *adapter.Sender, with ...Setting) func(http.RoundTripper) http.RoundTripper {
	var o settings
	for _, set := range with {
		set(&o)
	}
	return func(next http.RoundTripper) http.RoundTripper {
		if next == nil {
			next = http.DefaultTransport
		}
		return &roundTripper{sender: s, next: next, opts: o.opts}
	}
}

type roundTripper struct {
	sender *adapter.Sender
	next   http.RoundTripper
	opts   adapter.ForwardOptions
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	o := rt.opts
	if isSync(req.Context()) {
		o.Sync = true
	}
	return rt.sender.Forward(req, rt.next, o)
}

// CloseIdleConnections closes the idle connections of the client's round
// tripper; the Sender's own pools stay (Sender.CloseIdleConnections).
func (rt *roundTripper) CloseIdleConnections() {
	if c, ok := rt.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type syncKey struct{}

// WithSync marks the calls made under ctx as synchronous: through the
// proxy, they are held until the sink answers, and the answer (a reply
// event) comes back. Use it for the SDK's Request.
func WithSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, syncKey{}, true)
}

func isSync(ctx context.Context) bool {
	v, _ := ctx.Value(syncKey{}).(bool)
	return v
}
