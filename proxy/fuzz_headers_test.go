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
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// FuzzPrefersAsync: the Prefer parsing never panics; once the
// respond-async preference is removed, it is gone and every other
// preference is still there; and it is found whatever the other
// preferences around it.
func FuzzPrefersAsync(f *testing.F) {
	for _, s := range [][2]string{
		{"respond-async", ""}, {"return=minimal, respond-async", "wait=10"}, {"Respond-Async; a=b", ""},
		{"respond-async=1,,", " "}, {"wait=10; respond-async", ""}, {"respond-asynchronously", "x,y"},
		{"\"respond-async\"", ";;"}, {",", "respond-async ;"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		h := http.Header{delivery.HeaderPrefer: {a, b}}
		async := prefersAsync(h)
		withoutRespondAsync(h)
		if prefersAsync(h) {
			t.Fatalf("respond-async survived its removal from %q, %q: %q", a, b, h.Values(delivery.HeaderPrefer))
		}
		kept := strings.Join(h.Values(delivery.HeaderPrefer), ",")
		for _, v := range []string{a, b} {
			for pref := range strings.SplitSeq(v, ",") {
				tok, _, _ := strings.Cut(pref, ";")
				tok, _, _ = strings.Cut(tok, "=")
				isAsync := strings.EqualFold(strings.TrimSpace(tok), delivery.PreferRespondAsync)
				if isAsync && !async {
					t.Fatalf("prefersAsync(%q, %q) = false, but %q asks for it", a, b, pref)
				}
				if p := strings.TrimSpace(pref); !isAsync && p != "" && !strings.Contains(kept, p) {
					t.Fatalf("preference %q of %q, %q lost: kept %q", p, a, b, kept)
				}
			}
		}
		other := http.Header{delivery.HeaderPrefer: {"wait=5, " + a + " ,return=minimal"}}
		if prefersAsync(other) != prefersAsync(http.Header{delivery.HeaderPrefer: {a}}) {
			t.Fatalf("the preferences around %q change whether it asks for respond-async", a)
		}
	})
}

// FuzzForwardHeaders: what a request asks of the proxy (Kn-Forward-To,
// Kn-Forward-Timeout, Kn-Forward-Retry, Kn-Forward-Backoff-Delay, Prefer,
// Kn-Namespace) is either refused with one of the destination handler's
// reasons or yields a call within every configured bound.
func FuzzForwardHeaders(f *testing.F) {
	for _, s := range [][6]string{
		{"http://sink.ns.svc.cluster.local/", "PT10M", "3", "PT0.5S", "respond-async", "team-a"},
		{"http://sink.ns.svc/", "P1DT2H", "-1", "PT0S", "", "Team_A"},
		{"http://10.0.0.1:8080/x", " PT0.001S ", "99999999999999999999", "P1W", "wait=1", ""},
		{"https://a.ns.svc.cluster.local:443/", "PT1H1M1.5S", " 7 ", "-PT1S", "respond-async; x", "a-b"},
		{"http://127.0.0.1/", "pt1s", "0x10", "PT9999999999999999H", "", "-x"},
		{"", "P", "", "PT", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	p := DestinationParams{
		AllowedHosts: []string{"*.svc.cluster.local", "*.svc"},
		Policy:       &delivery.Policy{},
		MaxTimeout:   10 * time.Minute, MaxEventBytes: 1024,
		Retries: 5, MaxRetries: 20, BackoffDelay: 500 * time.Millisecond, MaxBackoffDelay: time.Minute,
	}
	reasons := map[Reason]bool{ReasonMissingDestination: true, ReasonBadDestination: true, ReasonBadRequest: true,
		ReasonDestinationDenied: true, ReasonBodyTooLarge: true}
	f.Fuzz(func(t *testing.T, to, timeout, retry, backoff, prefer, namespace string) {
		r, err := http.NewRequest(http.MethodPost, "http://proxy/", bytes.NewReader(nil))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{
			delivery.HeaderForwardTo: to, delivery.HeaderForwardTimeout: timeout, delivery.HeaderForwardRetry: retry,
			delivery.HeaderForwardBackoffDelay: backoff, delivery.HeaderPrefer: prefer, delivery.HeaderNamespace: namespace,
		} {
			if v != "" {
				r.Header[k] = []string{v}
			}
		}
		c := &call{}
		reason, err := p.fill(c, r)
		if err != nil {
			if !reasons[reason] || err.Error() == "" {
				t.Fatalf("fill refused with reason %q and error %v", reason, err)
			}
			return
		}
		switch {
		case c.dest == nil || c.destKey == "":
			t.Fatalf("fill accepted %q without a destination", to)
		case c.timeout <= 0 || c.timeout > p.MaxTimeout:
			t.Fatalf("timeout %s from %q, want within (0, %s]", c.timeout, timeout, p.MaxTimeout)
		case c.retries < 0 || int(c.retries) > p.MaxRetries:
			t.Fatalf("retries %d from %q, want within [0, %d]", c.retries, retry, p.MaxRetries)
		case c.backoff <= 0 || c.backoff > p.MaxBackoffDelay:
			t.Fatalf("backoff %s from %q, want within (0, %s]", c.backoff, backoff, p.MaxBackoffDelay)
		case c.tenant != "" && !isDNSLabel(c.tenant):
			t.Fatalf("tenant %q from Kn-Namespace %q is not a namespace name", c.tenant, namespace)
		case c.async != prefersAsync(r.Header):
			t.Fatalf("async = %v for Prefer %q", c.async, prefer)
		}
	})
}

// FuzzFraming: whatever bytes a connection carries, in whatever pieces and
// read with whatever buffers, the framing listener passes them on
// unchanged but for the one mark it may add, never holds more than a line,
// and never panics.
func FuzzFraming(f *testing.F) {
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n0\r\nT: 1\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\nHost: x\n\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: 1\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(7), uint8(3))
	}
	f.Add([]byte("0\n\n"), uint8(7), uint8(0)) // a mark longer than the reads (a harness bug once)
	mark := []byte(headerFramingError + ": ")
	f.Fuzz(func(t *testing.T, in []byte, piece, readSize uint8) {
		if bytes.Contains(in, mark) {
			return // a caller's own mark: nothing to tell apart
		}
		src := &pieceConn{data: in, piece: int(piece%64) + 1}
		c := &framingConn{Conn: src, f: framer{maxHead: 1 << 10}}
		var out []byte
		buf := make([]byte, int(readSize%32)+1)
		for range 2 * (len(in) + len(headerFramingError) + 64) { // reads of one byte at least
			n, err := c.Read(buf)
			out = append(out, buf[:n]...)
			if len(c.f.line) > max(c.f.maxHead, 4096)+64 {
				t.Fatalf("the framer holds a %d-byte line", len(c.f.line))
			}
			if err != nil {
				break
			}
		}
		if c.f.mode != modeChunkCRLF { // there, the line's bytes went out already
			out = append(out, c.f.line...) // the unfinished line, held until it ends
		}
		if n := bytes.Count(out, mark); n > 1 {
			t.Fatalf("%d marks added", n)
		}
		if i := bytes.Index(out, mark); i >= 0 {
			end := bytes.Index(out[i:], []byte("\r\n"))
			if end < 0 {
				t.Fatalf("an unfinished mark: %q", out[i:])
			}
			out = append(out[:i:i], out[i+end+2:]...)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("the framer changed the bytes:\n in: %q\nout: %q", in, out)
		}
	})
}

// pieceConn is a connection that reads data in pieces of at most piece
// bytes, then io.EOF.
type pieceConn struct {
	net.Conn
	data  []byte
	piece int
}

func (c *pieceConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.data[:min(c.piece, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}
