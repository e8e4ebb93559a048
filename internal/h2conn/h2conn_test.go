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

package h2conn

import (
	"bytes"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestFlushLockedLeavesFramesToTheWaitingWriter: a writer that lets go of
// the lock while another waits for it leaves its frames buffered, and the
// last writer of the burst sends them all.
func TestFlushLockedLeavesFramesToTheWaitingWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	w.Lock()
	if err := w.FR.WritePing(false, [8]byte{1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		w.Lock()
		defer w.Unlock()
		if err := w.FR.WritePing(false, [8]byte{2}); err != nil {
			done <- err
			return
		}
		done <- w.FlushLocked()
	}()
	testproc.Eventually(t, 10*time.Second, "the second writer waits for the lock", func() bool { return w.Waiting() == 1 })
	if err := w.FlushLocked(); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("%d bytes flushed while another writer waited, want none", out.Len())
	}
	w.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := 2 * (9 + 8); out.Len() != want {
		t.Fatalf("%d bytes sent by the last writer, want both PINGs (%d)", out.Len(), want)
	}
}

// silent makes h's peer silent for an hour.
func silent(h *Health) { h.lastRead.Store(time.Now().Add(-time.Hour).UnixNano()) }

// TestHealth: a silent peer gets a PING; a wrong ack changes nothing, the
// right one makes it healthy again; a PING unanswered at the next check
// makes it dead; a peer heard from recently gets none.
func TestHealth(t *testing.T) {
	var h Health
	h.Start(time.Minute, time.Minute, func() {})
	defer h.Stop()
	silent(&h)
	dead, ping := h.Check()
	if dead || ping == nil {
		t.Fatalf("silent peer: dead %v, ping %v; want a PING", dead, ping)
	}
	h.Acked([8]byte{^ping[0]})
	if dead, _ := h.Check(); !dead {
		t.Fatal("a PING acked with other data counted as answered")
	}
	var h2 Health
	h2.Start(time.Minute, time.Minute, func() {})
	defer h2.Stop()
	silent(&h2)
	_, ping = h2.Check()
	h2.Acked(*ping)
	silent(&h2)
	if dead, next := h2.Check(); dead || next == nil {
		t.Fatalf("after the ack: dead %v, ping %v; want a new PING", dead, next)
	}
	var h3 Health
	h3.Start(time.Minute, time.Minute, func() {})
	defer h3.Stop()
	h3.Read()
	if dead, ping := h3.Check(); dead || ping != nil {
		t.Fatalf("peer just heard from: dead %v, ping %v; want nothing", dead, ping)
	}
}
