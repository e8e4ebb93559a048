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

package load

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// probeTarget is where a probe goes: a peer (dest set) or the sink itself.
type probeTarget struct {
	rt         http.RoundTripper
	base, dest string
}

// probeSet is what the probes to one target measured.
type probeSet struct {
	ok     []time.Duration
	errors int
}

// probe fires one fast call at each target every interval, open loop (a
// slow answer does not delay the next probe), until stop closes, count
// ticks have fired or ctx ends. Each probe is bounded by 30 s. It returns
// once every probe has ended, one probeSet per target.
func probe(ctx context.Context, every time.Duration, count int, stop <-chan struct{}, targets ...probeTarget) []probeSet {
	sets := make([]probeSet, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(every)
	defer tick.Stop()
	fire := func(seq uint64) {
		for i, t := range targets {
			wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				req, err := newCall(pctx, t.base, "/fast", t.dest, seq)
				ok := false
				var d time.Duration
				if err == nil {
					d, ok = roundTrip(t.rt, req)
				}
				mu.Lock()
				defer mu.Unlock()
				if ok {
					sets[i].ok = append(sets[i].ok, d)
				} else {
					sets[i].errors++
				}
			})
		}
	}
loop:
	for n := range count {
		fire(uint64(n))
		select {
		case <-tick.C:
		case <-stop:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	wg.Wait()
	return sets
}
