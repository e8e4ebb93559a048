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

// Package testproc holds what the tests that run real processes on
// loopback share: a free port; polling a condition with a deadline (Poll,
// Eventually, Consistently); a process started with its output kept and
// a data race in it failing the test (Start, StartProxy); a destination
// that records what arrives (Sink); an h2c client; the metrics a process
// serves (Scrape, Value); an OTLP receiver.
package testproc

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port free on every address right now, chosen at
// random below the kernel's ephemeral port range. A port from that range,
// which binding port 0 gives, can be taken between this check and the
// child's own bind as the local port of any outgoing connection, and the
// tests open thousands of them: under load that happened. Below the range
// only another test choosing the same port at the same moment can take
// it. Where the range leaves no room below it, port 0 decides.
func FreePort(tb testing.TB) int {
	tb.Helper()
	if low := ephemeralLow(); low-minTestPort >= 1000 {
		for range 100 {
			p := minTestPort + rand.IntN(low-minTestPort)
			l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
			if err != nil {
				continue // in use: another
			}
			_ = l.Close()
			return p
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// minTestPort is the lowest port FreePort chooses: above the well-known
// and most registered services' ports.
const minTestPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, or 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}

// Poll calls cond every 10 ms until it holds or d has passed, and
// reports whether it held. It fails no test, so it may run on any
// goroutine: a handler, a helper that reports with Errorf.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// Eventually polls cond every 10 ms until it holds, failing the test after d.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(d, cond) {
		tb.Fatalf("timed out after %s waiting until %s", d, what)
	}
}

// EventuallyState is Eventually for a cond that also describes the state
// it saw, so that the failure says how far from holding it was.
func EventuallyState(tb testing.TB, d time.Duration, what string, cond func() (held bool, state string)) {
	tb.Helper()
	var last string
	if !Poll(d, func() (held bool) { held, last = cond(); return held }) {
		tb.Fatalf("timed out after %s waiting until %s (last: %s)", d, what, last)
	}
}

// Receive returns the next value of ch, failing the test if none comes
// within d.
func Receive[T any](tb testing.TB, d time.Duration, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		tb.Fatalf("timed out after %s waiting for %s", d, what)
		panic("unreachable")
	}
}

// SyncBuffer is a bytes.Buffer safe for a process's two output streams.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Consistently polls cond every 50 ms for d, failing the test as soon as
// it does not hold.
func Consistently(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if !cond() {
			tb.Fatalf("not %s", what)
		}
		<-tick.C
	}
}

// EnvInt reads the positive integer a benchmark or test takes from the
// environment variable name, def when it is unset; anything else fails tb.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// EnvDuration reads a positive duration from the environment variable
// name, def when it is unset; anything else fails tb.
func EnvDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration such as 200s", name, v)
	}
	return d
}
