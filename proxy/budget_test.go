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
	"bufio"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestMemoryBudget(t *testing.T) {
	tests := []struct {
		name     string
		size     int64
		reserve  []int64 // in order; each either fits or not
		fits     []bool
		reserved int64 // after all of them
	}{
		{name: "exactly the size fits", size: 100, reserve: []int64{100}, fits: []bool{true}, reserved: 100},
		{name: "one byte more does not", size: 100, reserve: []int64{101}, fits: []bool{false}, reserved: 0},
		{name: "the last byte fits, the next does not", size: 100, reserve: []int64{60, 40, 1}, fits: []bool{true, true, false}, reserved: 100},
		{name: "a refusal takes nothing", size: 100, reserve: []int64{60, 41, 40}, fits: []bool{true, false, true}, reserved: 100},
		{name: "zero bytes always fit", size: 0, reserve: []int64{0, 0}, fits: []bool{true, true}, reserved: 0},
		{name: "a zero budget fits no byte", size: 0, reserve: []int64{1}, fits: []bool{false}, reserved: 0},
		{name: "a negative size is zero", size: -5, reserve: []int64{1}, fits: []bool{false}, reserved: 0},
		{name: "no overflow near the int64 range", size: math.MaxInt64, reserve: []int64{math.MaxInt64 - 1, math.MaxInt64, 1}, fits: []bool{true, false, true}, reserved: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewMemoryBudget(tt.size)
			for i, n := range tt.reserve {
				err := b.Reserve(n)
				if fits := err == nil; fits != tt.fits[i] {
					t.Errorf("Reserve(%d) #%d = %v, want fits %v", n, i, err, tt.fits[i])
				}
				if err != nil && !errors.Is(err, ErrMemoryBudget) {
					t.Errorf("Reserve(%d) = %v, want ErrMemoryBudget", n, err)
				}
			}
			if got := b.Reserved(); got != tt.reserved {
				t.Errorf("Reserved() = %d, want %d", got, tt.reserved)
			}
			b.Release(b.Reserved())
			if got := b.Reserved(); got != 0 {
				t.Errorf("Reserved() after releasing everything = %d", got)
			}
		})
	}
}

func TestNilMemoryBudgetAdmitsEverything(t *testing.T) {
	var b *MemoryBudget
	if err := b.Reserve(math.MaxInt64); err != nil {
		t.Errorf("nil budget: Reserve = %v", err)
	}
	b.Release(math.MaxInt64)
	if b.Size() != 0 || b.Reserved() != 0 {
		t.Errorf("nil budget: Size %d, Reserved %d, want 0, 0", b.Size(), b.Reserved())
	}
}

// TestMemoryBudgetConcurrent: callers reserving and releasing at once
// never take more than the budget between them, and leave it at zero.
func TestMemoryBudgetConcurrent(t *testing.T) {
	const size, workers, rounds = 1000, 8, 2000
	b := NewMemoryBudget(size)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for w := range workers {
		wg.Go(func() {
			n := int64(100 + 37*w)
			for range rounds {
				if b.Reserve(n) != nil {
					continue
				}
				if r := b.Reserved(); r > size {
					mu.Lock()
					peak = max(peak, r)
					mu.Unlock()
				}
				b.Release(n)
			}
		})
	}
	wg.Wait()
	if peak > 0 {
		t.Errorf("%d bytes reserved at once in a budget of %d", peak, size)
	}
	if got := b.Reserved(); got != 0 {
		t.Errorf("Reserved() = %d after every reservation was released", got)
	}
}

// TestHeaderBytesIsTheHeadAsSent: what a call reserves for its headers is
// its head's size on the wire, request line and blank line included.
func TestHeaderBytesIsTheHeadAsSent(t *testing.T) {
	heads := []string{
		"POST / HTTP/1.1\r\nHost: proxy\r\n\r\n",
		"POST /path?q=1 HTTP/1.1\r\nHost: proxy:8080\r\nKn-Forward-To: http://sink.ns.svc.cluster.local/\r\nContent-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: proxy\r\nCe-Id: 1\r\nCe-Id: 2\r\nX-Large: " + strings.Repeat("v", 60000) + "\r\n\r\n",
	}
	for _, head := range heads {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			t.Fatalf("ReadRequest(%.60q): %v", head, err)
		}
		if got := headerBytes(r); got != int64(len(head)) {
			t.Errorf("headerBytes(%.60q...) = %d, want %d", head, got, len(head))
		}
	}
}
