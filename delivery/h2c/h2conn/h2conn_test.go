package h2conn

import (
	"bytes"
	"testing"
	"time"
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
	for deadline := time.Now().Add(10 * time.Second); w.Waiting() != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the second writer never waited for the lock")
		}
		time.Sleep(time.Millisecond)
	}
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

// TestHealth: a silent peer gets a PING; a wrong ack changes nothing, the
// right one makes it healthy again; a PING unanswered at the next check
// makes it dead; a peer heard from recently gets none.
func TestHealth(t *testing.T) {
	var h Health
	h.Start(time.Nanosecond, time.Hour, func() {})
	defer h.Stop()
	time.Sleep(time.Millisecond) // silent for longer than every
	dead, ping := h.Check()
	if dead || ping == nil {
		t.Fatalf("silent peer: dead %v, ping %v; want a PING", dead, ping)
	}
	h.Acked([8]byte{^ping[0]})
	if dead, _ := h.Check(); !dead {
		t.Fatal("a PING acked with other data counted as answered")
	}
	var h2 Health
	h2.Start(time.Nanosecond, time.Hour, func() {})
	defer h2.Stop()
	time.Sleep(time.Millisecond)
	_, ping = h2.Check()
	h2.Acked(*ping)
	time.Sleep(time.Millisecond)
	if dead, next := h2.Check(); dead || next == nil {
		t.Fatalf("after the ack: dead %v, ping %v; want a new PING", dead, next)
	}
	var h3 Health
	h3.Start(time.Hour, time.Hour, func() {})
	defer h3.Stop()
	h3.Read()
	if dead, ping := h3.Check(); dead || ping != nil {
		t.Fatalf("peer just heard from: dead %v, ping %v; want nothing", dead, ping)
	}
}
