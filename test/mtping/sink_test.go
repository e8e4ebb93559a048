//go:build integration

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

package mtping

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// received is one event as a sink saw it.
type received struct {
	at     time.Time
	event  event.Event
	header http.Header
}

// viaProxy reports whether the event came through the proxy (which marks
// what it forwards with CDN-Loop).
func (r received) viaProxy() bool { return r.header.Get("CDN-Loop") != "" }

// sink records the CloudEvents posted to it, by path: each PingSource gets
// its own path, http://127.0.0.1:<port>/<name>.
type sink struct {
	*httptest.Server
	mu     sync.Mutex
	events map[string][]received
}

func newSink(t *testing.T) *sink { return startSink(t, nil) }

// newTLSSink is a sink served over TLS (h2 or HTTP/1.1) with cert.
func newTLSSink(t *testing.T, cert tls.Certificate) *sink {
	return startSink(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
}

// startSink starts a sink, over TLS with tlsConfig when it is set.
func startSink(t *testing.T, tlsConfig *tls.Config) *sink {
	s := &sink{events: map[string][]received{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			// The sender sends events and nothing else (no "PRI *"
			// preface to learn the sink's protocol).
			t.Errorf("sink: %s %s %s is no event", r.Method, r.RequestURI, r.Proto)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		e, err := cehttp.NewEventFromHTTPRequest(r)
		if err != nil {
			t.Errorf("sink: not a CloudEvent: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.events[strings.TrimPrefix(r.URL.Path, "/")] = append(s.events[strings.TrimPrefix(r.URL.Path, "/")],
			received{at: time.Now(), event: *e, header: r.Header.Clone()})
		s.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	if tlsConfig != nil {
		s.EnableHTTP2 = true
		s.TLS = tlsConfig
		// The handshakes refused on purpose would flood the log.
		s.Config.ErrorLog = log.New(io.Discard, "", 0)
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// url is the sink address of source name.
func (s *sink) url(name string) string { return s.URL + "/" + name }

// got returns the events of source name received since from.
func (s *sink) got(name string, from time.Time) []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []received
	for _, r := range s.events[name] {
		if !r.at.Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// sent returns the events of source name the adapter sent since from, by
// the times it stamped on them: countTicks' window, on the ticks' clock
// like its intervals. By arrival, an event of a tick due before from that
// arrived late would count, and show a tick lost before from as missing.
func (s *sink) sent(name string, from time.Time) []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []received
	for _, r := range s.events[name] {
		if !r.event.Time().Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// tally describes the events of one source at a fixed period, counted by
// the times the adapter stamped on them when it sent them, not by when
// they arrived: how long a send takes on a loaded machine (a token to
// mint, a connection to open) moves the arrivals, not the ticks. Each send
// is delayed by up to the spread (500 ms), so an interval between two
// events is one period give or take the spread: under a quarter period it
// is a duplicate (two replicas fired the same tick), otherwise it covers
// floor(interval/period + 1/4) ticks (at least one), all but one of them
// missing.
type tally struct {
	events, duplicates, missing int
	longest                     time.Duration
}

func countTicks(rs []received, period time.Duration) tally {
	tl := tally{events: len(rs)}
	times := make([]time.Time, len(rs))
	for i, r := range rs {
		times[i] = r.event.Time()
	}
	slices.SortFunc(times, time.Time.Compare) // two replicas' sends may arrive in either order
	for i := 1; i < len(times); i++ {
		d := times[i].Sub(times[i-1])
		tl.longest = max(tl.longest, d)
		if d < period/4 {
			tl.duplicates++
			continue
		}
		tl.missing += max(1, int(math.Floor(float64(d)/float64(period)+0.25))) - 1
	}
	return tl
}

// jwtClaims decodes a bearer token's payload, unverified: the API server
// that issued it is the test's own.
func jwtClaims(t *testing.T, authorization string) (sub string, aud []string) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(authorization, "Bearer "), ".")
	if len(parts) != 3 {
		t.Fatalf("Authorization %q is not a bearer JWT", authorization)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Sub string   `json:"sub"`
		Aud []string `json:"aud"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Sub, c.Aud
}
