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
// loopback share: a free port, waiting on a condition with a deadline, a
// buffer for a process's output.
package testproc

import (
	"bytes"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port free on 127.0.0.1 right now.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Eventually polls cond every 10 ms until it holds, failing the test after d.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting until %s", d, what)
		}
		<-tick.C
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
