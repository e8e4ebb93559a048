//go:build cluster

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

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHandOff times an async hand-off through the real path (Traefik,
// queue-proxy, the proxy) until the caller has its 202: what a source
// waits per event once it forwards. The sink answers at once, so held
// calls stay few. `make bench-cluster` runs it.
func BenchmarkHandOff(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, b, "handoff")
	s := newSink(ctx, b, ns)
	auth := "Bearer " + proxyToken(ctx, b, ns)
	var seq atomic.Int64
	handOff := func() error {
		id := seq.Add(1)
		h := map[string]string{"Kn-Forward-Authorization": auth, "Prefer": "respond-async", "Ce-Specversion": "1.0",
			"Ce-Id": fmt.Sprintf("handoff-%d", id), "Ce-Source": "/e2e/handoff", "Ce-Type": "e2e.handoff", "Content-Type": "application/json"}
		a, err := tryForward(ctx, s.URL+"/handoff", h, []byte(`{"n":1}`))
		if err == nil && a.Status != http.StatusAccepted {
			err = fmt.Errorf("status %d (%s)", a.Status, a.reason())
		}
		return err
	}
	// One caller: ns/op is the latency of a hand-off.
	b.Run("callers=1", func(b *testing.B) {
		for range b.N {
			if err := handOff(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// 32 callers at once: ns/op is the time per hand-off of the whole,
	// the inverse of the throughput.
	b.Run("callers=32", func(b *testing.B) {
		b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := handOff(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
