package h2c

// WaitingWriters is how many writers wait for the write locks of t's
// connections (h2conn.Writer.Lock): a test lines up a burst of writes with it.
func (t *Transport) WaitingWriters() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pools {
		for _, c := range p.conns {
			n += c.w.Waiting()
		}
	}
	return n
}
