// Package tailbuf keeps the end of what a child process writes: enough to
// say why it failed, bounded however long it runs.
package tailbuf

import "sync"

// Tail keeps the last Max bytes written to it; safe for a process's two
// output streams at once.
type Tail struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

// New returns a Tail that keeps the last max bytes.
func New(max int) *Tail { return &Tail{Max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.Max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
