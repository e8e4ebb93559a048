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

package proxytest

import (
	"encoding/json"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// Toxic is an in-process toxiproxy (github.com/Shopify/toxiproxy/v2) TCP
// proxy in front of one upstream: the network between the proxy and a
// destination, where latency, resets, black holes, slow closes and low
// bandwidth are injected. It stops when the test ends.
type Toxic struct {
	// Addr is where it listens (127.0.0.1:port).
	Addr string
	// URL is "http://" + Addr + "/".
	URL string

	px *toxiproxy.Proxy
}

// NewToxic starts a Toxic that forwards to upstream (host:port).
func NewToxic(t testing.TB, upstream string) *Toxic {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(srv, "toxic", "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(px.Stop)
	return &Toxic{Addr: px.Listen, URL: "http://" + px.Listen + "/", px: px}
}

// Add adds a toxic of type typ ("latency", "reset_peer", "timeout",
// "slow_close", "bandwidth", "limit_data", ...) to a stream ("upstream":
// towards the destination, "downstream": back from it) with the given
// attributes, named typ_stream.
func (x *Toxic) Add(t testing.TB, typ, stream string, attributes map[string]any) {
	t.Helper()
	spec, err := json.Marshal(map[string]any{"type": typ, "stream": stream, "attributes": attributes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.px.Toxics.AddToxicJson(strings.NewReader(string(spec))); err != nil {
		t.Fatalf("toxiproxy: adding %s: %v", spec, err)
	}
}

// Remove removes the toxic named typ_stream.
func (x *Toxic) Remove(t testing.TB, name string) {
	t.Helper()
	if err := x.px.Toxics.RemoveToxic(t.Context(), name); err != nil {
		t.Fatalf("toxiproxy: removing %s: %v", name, err)
	}
}

// IgnoreToxiproxy are goleak options that leave out toxiproxy's own
// goroutines: those of a Toxic still running (its listener), and the pipe
// goroutines that toxiproxy v2.12.0 leaves blocked on channel sends nobody
// drains after a reset_peer or latency toxic. They belong to the test
// tool, not to the code under test; every other goroutine still counts.
func IgnoreToxiproxy() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic.func1"),
		// A running Toxic's listener, until the test's cleanup stops it.
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).server"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).freeBlocker"),
	}
}
