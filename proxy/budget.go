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
	"errors"
	"net/http"
	"sync/atomic"
)

// ErrMemoryBudget: what the call would keep does not fit in what is left
// of the pod's memory budget. The admission handler answers it 503
// overloaded.
var ErrMemoryBudget = errors.New("the pod's memory budget has no room for the call")

// MemoryBudget bounds the bytes the calls held keep that grow with what
// their callers send: admission counts calls (Limiter), this counts their
// bytes. Each call reserves its request headers on arrival, and an async
// call its body too, and gives them back when it ends. It never queues. It
// is safe for concurrent use; a nil *MemoryBudget admits everything.
type MemoryBudget struct {
	size     int64
	reserved atomic.Int64
}

// NewMemoryBudget returns a budget of size bytes. If size is zero or less,
// nothing that reserves a byte fits.
func NewMemoryBudget(size int64) *MemoryBudget {
	return &MemoryBudget{size: max(size, 0)}
}

// Reserve takes n bytes of the budget, or returns ErrMemoryBudget and
// takes nothing when fewer than n are left. Reserving zero bytes always
// succeeds.
func (b *MemoryBudget) Reserve(n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	for {
		cur := b.reserved.Load()
		if n > b.size-cur {
			return ErrMemoryBudget
		}
		if b.reserved.CompareAndSwap(cur, cur+n) {
			return nil
		}
	}
}

// Release gives back n bytes that Reserve took.
func (b *MemoryBudget) Release(n int64) {
	if b != nil && n > 0 {
		b.reserved.Add(-n)
	}
}

// Size returns the budget in bytes (0 for a nil budget).
func (b *MemoryBudget) Size() int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// Reserved returns the bytes reserved now.
func (b *MemoryBudget) Reserved() int64 {
	if b == nil {
		return 0
	}
	return b.reserved.Load()
}

// reservation is what one call holds of the memory budget. Like the
// call's admission slot, it belongs to whoever ends the call (call.phase):
// it grows only on the chain's goroutine, before the call leaves it, and
// is released once, with the slot.
type reservation struct {
	b *MemoryBudget
	n int64
}

// grow reserves n more bytes for the call, or returns ErrMemoryBudget and
// leaves the reservation as it was.
func (r *reservation) grow(n int64) error {
	if err := r.b.Reserve(n); err != nil {
		return err
	}
	r.n += n
	return nil
}

// release gives every byte of the reservation back.
func (r *reservation) release() {
	r.b.Release(r.n)
	r.n = 0
}

// headerBytes is what r's header block takes as HTTP/1.1 spells it: the
// request line, a Host line, every field as "Name: value" and CRLF, and
// the blank line. Whatever the protocol it came over, the proxy keeps
// every name and value of it for as long as the call is held (the header
// map, and for an async call the event's own headers), so this is what
// the call reserves for its headers.
func headerBytes(r *http.Request) int64 {
	const crlf = 2
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + crlf
	n += len("Host: ") + len(r.Host) + crlf
	for k, vv := range r.Header {
		for _, v := range vv {
			n += len(k) + len(": ") + len(v) + crlf
		}
	}
	return int64(n + crlf)
}
