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

package h2c_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// benchClients are the transports compared: this package's, and net/http's
// speaking h2c (HTTP/2 with prior knowledge) the way Go's standard library
// does it.
var benchClients = []struct {
	name  string
	newRT func() http.RoundTripper
}{
	{"h2c", func() http.RoundTripper { return &h2c.Transport{} }},
	{"net-http", func() http.RoundTripper {
		tr := &http.Transport{
			DialContext:        (&net.Dialer{}).DialContext,
			DisableCompression: true,
			Protocols:          new(http.Protocols),
		}
		tr.Protocols.SetUnencryptedHTTP2(true)
		return tr
	}},
}

// BenchmarkRoundTrip: a 200-byte POST answered 200 with a small body by
// Go's h2c server, one call at a time and 32 per core at once.
func BenchmarkRoundTrip(b *testing.B) {
	for _, c := range benchClients {
		for _, perCore := range []int{0, 32} {
			name := c.name + "/one-at-a-time"
			if perCore > 0 {
				name = fmt.Sprintf("%s/%d-per-core", c.name, perCore)
			}
			b.Run(name, func(b *testing.B) { benchmarkRoundTrip(b, c.newRT(), perCore) })
		}
	}
}

func benchmarkRoundTrip(b *testing.B, rt http.RoundTripper, perCore int) {
	srv := newGoServer(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"accepted":true}`)
	}, nil)
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	calltest.BenchPost(b, rt, srv.url, perCore)
}

// BenchmarkHeld: the memory (live heap and goroutine stacks, the callers'
// own goroutines included) and the
// goroutines that each call waiting for its answer costs, with
// H2C_HELD_CALLS calls (default 1000) held by a frame server that holds
// streams without a goroutine each. Reported as B/held and
// goroutines/held; one op is one round of held calls.
func BenchmarkHeld(b *testing.B) {
	n := testproc.EnvInt(b, "H2C_HELD_CALLS", 1000)
	for _, c := range benchClients {
		b.Run(c.name, func(b *testing.B) { benchmarkHeld(b, c.newRT(), n) })
	}
}

func benchmarkHeld(b *testing.B, rt http.RoundTripper, n int) {
	srv := newHoldServer(b, 1<<20)
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	errs := make(chan error, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := func(k int) (bytes int64, goroutines int) {
		start := srv.streams.Load()
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		g0 := runtime.NumGoroutine()
		startHeld(b, ctx, rt, srv.url, k, errs)
		testproc.Eventually(b, waitLimit, fmt.Sprintf("%d calls are held", k), func() bool { return srv.streams.Load() == start+int64(k) })
		runtime.GC()
		runtime.ReadMemStats(&m1)
		g1 := runtime.NumGoroutine()
		srv.answerAll()
		for range k {
			if err := receive(b, errs, "a held call to end"); err != nil {
				b.Fatal(err)
			}
		}
		return int64(m1.HeapAlloc+m1.StackInuse) - int64(m0.HeapAlloc+m0.StackInuse), g1 - g0
	}
	held(1) // the connection up before measuring
	var total int64
	var goroutines int
	for b.Loop() {
		by, g := held(n)
		total += by
		goroutines += g
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(n), "B/held")
	b.ReportMetric(float64(goroutines)/float64(b.N)/float64(n), "goroutines/held")
}
