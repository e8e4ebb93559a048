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

package proxytest

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// DNS is a fake DNS server on loopback UDP, enough for Go's own resolver:
// it answers A and AAAA questions about the names it knows with TTL 0, one
// answer set per lookup in turn (the last one repeated), and NXDOMAIN for
// any other name. A lookup by a dialer asks A and AAAA once each, so the
// n-th lookup of a name gets its n-th answer set: a name can rebind from
// one address to another between two dials.
type DNS struct {
	// Addr is the server's UDP address.
	Addr string

	conn    net.PacketConn
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	asked   map[dnsKey]int
}

type dnsKey struct {
	name  string
	qtype uint16
}

const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
)

// NewDNS starts a DNS server that answers for the names in answers
// (lower-case, no trailing dot). It stops when the test ends.
func NewDNS(t testing.TB, answers map[string][][]netip.Addr) *DNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &DNS{Addr: conn.LocalAddr().String(), conn: conn, answers: answers, asked: map[dnsKey]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serve()
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
	return d
}

// Resolver returns a pure-Go resolver that asks this server only.
func (d *DNS) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "udp", d.Addr)
		},
	}
}

// Lookups returns how many A questions about name came so far.
func (d *DNS) Lookups(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[dnsKey{name, dnsTypeA}]
}

func (d *DNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.reply(buf[:n]); resp != nil {
			_, _ = d.conn.WriteTo(resp, from)
		}
	}
}

// reply builds the answer to one query, or nil for a malformed one.
func (d *DNS) reply(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	i := 12
	var labels []string
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l&0xc0 != 0 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i : i+2])
	question := q[12 : i+4]
	name := strings.ToLower(strings.Join(labels, "."))

	d.mu.Lock()
	sets, known := d.answers[name]
	var addrs []netip.Addr
	if known && len(sets) > 0 {
		k := dnsKey{name, qtype}
		set := sets[min(d.asked[k], len(sets)-1)]
		d.asked[k]++
		for _, a := range set {
			if qtype == dnsTypeA && a.Is4() || qtype == dnsTypeAAAA && !a.Is4() {
				addrs = append(addrs, a)
			}
		}
	}
	d.mu.Unlock()

	// Header: the query's id; response, authoritative, recursion desired
	// as asked, recursion available; NXDOMAIN for unknown names.
	flags := uint16(0x8000|0x0400|0x0080) | binary.BigEndian.Uint16(q[2:4])&0x0100
	if !known {
		flags |= 3
	}
	resp := make([]byte, 12, 12+len(question)+len(addrs)*28)
	copy(resp[0:2], q[0:2])
	binary.BigEndian.PutUint16(resp[2:4], flags)
	binary.BigEndian.PutUint16(resp[4:6], 1)
	binary.BigEndian.PutUint16(resp[6:8], uint16(len(addrs)))
	resp = append(resp, question...)
	for _, a := range addrs {
		data := a.AsSlice()
		resp = append(resp, 0xc0, 12) // the name: a pointer to the question's
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 0) // TTL
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(data)))
		resp = append(resp, data...)
	}
	return resp
}
