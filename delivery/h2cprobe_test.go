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

package delivery

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// probeServer is a destination that records the methods it was called with.
type probeServer struct {
	*httptest.Server
	mu      sync.Mutex
	methods []string
}

func newProbeServer(t *testing.T, h2c bool) *probeServer {
	t.Helper()
	s := &probeServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.methods = append(s.methods, r.Method)
		s.mu.Unlock()
	}))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(h2c)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *probeServer) addr() string { return strings.TrimPrefix(s.URL, "http://") }

func (s *probeServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.methods...)
}

func TestH2CProberAnswers(t *testing.T) {
	h2c := newProbeServer(t, true)
	h1 := newProbeServer(t, false)
	closed := newProbeServer(t, false)
	closedAddr := closed.addr()
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			c.Close() // hangs up without a word
		}
	}()

	p := &H2CProber{Dial: (&net.Dialer{}).DialContext, Timeout: 5 * time.Second}
	for _, tc := range []struct {
		name string
		addr string
		want bool
	}{
		{name: "h2c server", addr: h2c.addr(), want: true},
		{name: "HTTP/1.1-only server", addr: h1.addr(), want: false},
		{name: "nothing listening", addr: closedAddr, want: false},
		{name: "hangs up at once", addr: silent.Addr().String(), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Supports(context.Background(), tc.addr); got != tc.want {
				t.Errorf("Supports(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
	// The probe reaches no handler of an h2c server, and an HTTP/1 server's
	// handlers see at most the preface's "PRI *" request: never an event.
	if m := h2c.seen(); len(m) != 0 {
		t.Errorf("the h2c server's handler saw %v", m)
	}
	for _, m := range h1.seen() {
		if m != "PRI" {
			t.Errorf("the HTTP/1 server's handler saw a %s request", m)
		}
	}
	if _, cached := p.cache[closedAddr]; cached {
		t.Error("an unreachable destination was cached")
	}
}

func TestH2CProberCache(t *testing.T) {
	h1 := newProbeServer(t, false)
	var dials int
	now := time.Unix(1000, 0)
	p := &H2CProber{
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials++
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TTL:        time.Minute,
		MaxEntries: 2,
		Now:        func() time.Time { return now },
	}
	ctx := context.Background()
	p.Supports(ctx, h1.addr())
	p.Supports(ctx, h1.addr())
	if dials != 1 {
		t.Fatalf("%d probes within the TTL, want 1", dials)
	}
	now = now.Add(time.Minute)
	p.Supports(ctx, h1.addr())
	if dials != 2 {
		t.Fatalf("%d probes after the TTL, want 2", dials)
	}
	// Past MaxEntries the cache is pruned, never grown.
	p.cache["a:1"] = probeAnswer{expires: now.Add(time.Hour)}
	p.cache["b:1"] = probeAnswer{expires: now.Add(time.Hour)}
	p.mu.Lock()
	n := len(p.cache)
	p.mu.Unlock()
	if n != 3 {
		t.Fatalf("cache holds %d answers, want 3 before the next probe", n)
	}
	delete(p.cache, h1.addr())
	p.Supports(ctx, h1.addr())
	if len(p.cache) > 2 {
		t.Errorf("cache holds %d answers, more than MaxEntries 2", len(p.cache))
	}
}

// TestH2CProberSharesAProbe: calls that ask about a destination while it
// is being probed wait for that one probe instead of opening one each (a
// tick's burst to a new sink); all get its answer, and a caller that
// leaves stops waiting without spoiling the answer for the others.
func TestH2CProberSharesAProbe(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1 destination", true: "h2c destination"}[h2c], func(t *testing.T) {
			srv := newProbeServer(t, h2c)
			var dials atomic.Int64
			gate := make(chan struct{})
			p := &H2CProber{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				<-gate // every caller asks before the probe gets anywhere
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}
			const callers = 50
			answers := make(chan bool, callers)
			var asked sync.WaitGroup
			for range callers {
				asked.Add(1)
				go func() {
					asked.Done()
					answers <- p.Supports(context.Background(), srv.addr())
				}()
			}
			asked.Wait()
			// One caller gives up while the probe is under way.
			leaving, leave := context.WithCancel(context.Background())
			left := make(chan bool, 1)
			go func() { left <- p.Supports(leaving, srv.addr()) }()
			testproc.Eventually(t, 10*time.Second, "the probe has started", func() bool { return dials.Load() == 1 })
			leave()
			select {
			case got := <-left:
				if got {
					t.Error("the caller that left was told the destination speaks h2c")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the caller that left still waits for the probe")
			}
			close(gate)
			for range callers {
				if got := <-answers; got != h2c {
					t.Fatalf("Supports = %v, want %v", got, h2c)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("%d callers at once opened %d probes, want 1", callers+1, n)
			}
		})
	}
}
