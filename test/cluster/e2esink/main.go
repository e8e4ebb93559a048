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

// Command e2esink is the destination of the cluster's end-to-end tests: it
// records every request it receives (GET /records returns them, in order of
// arrival), holds it as long as its query asks (?hold=60s), then answers
// with ?status= (200 if unset), echoing the request as a reply event when
// ?reply=1. Standard library only, so it builds into a one-layer image.
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Record is one request as the sink saw it.
type Record struct {
	Seq         int       `json:"seq"`
	Time        time.Time `json:"time"`
	Method      string    `json:"method"`
	Path        string    `json:"path"` // with the query
	Proto       string    `json:"proto"`
	ID          string    `json:"id"` // Ce-Id, or "id" of a structured event
	Source      string    `json:"source"`
	Type        string    `json:"type"`
	EventTime   string    `json:"eventTime"` // Ce-Time: a PingSource's tick
	ContentType string    `json:"contentType"`
	BodySHA256  string    `json:"bodySha256"`
	BodyBytes   int       `json:"bodyBytes"`
	// TokenAudience is the aud claim of a Bearer token in Authorization
	// (not verified: the sink only reports what a source sent it).
	TokenAudience string `json:"tokenAudience,omitempty"`
	// ForwardHeaders lists Kn-Forward-* headers that reached the sink (the
	// proxy must strip them all).
	ForwardHeaders []string `json:"forwardHeaders,omitempty"`
	// Outcome is "held" while the call is held, then "answered" or
	// "canceled" (the caller went away first).
	Outcome string `json:"outcome"`
}

// maxRecords bounds memory; past it requests are still answered but
// counted in Dropped, which /records reports.
const maxRecords = 500000

type sink struct {
	mu      sync.Mutex
	records []Record
	dropped int
}

func (s *sink) add(r Record) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) >= maxRecords {
		s.dropped++
		return -1
	}
	r.Seq = len(s.records)
	s.records = append(s.records, r)
	return r.Seq
}

func (s *sink) end(seq int, outcome string) {
	if seq < 0 {
		return
	}
	s.mu.Lock()
	s.records[seq].Outcome = outcome
	s.mu.Unlock()
}

func (s *sink) serveRecords(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := struct {
		Records []Record `json:"records"`
		Dropped int      `json:"dropped"`
	}{append([]Record(nil), s.records...), s.dropped}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *sink) serveEvent(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)
	rec := Record{
		Time: time.Now(), Method: r.Method, Path: r.URL.RequestURI(), Proto: r.Proto,
		ID: r.Header.Get("Ce-Id"), Source: r.Header.Get("Ce-Source"), Type: r.Header.Get("Ce-Type"), EventTime: r.Header.Get("Ce-Time"),
		ContentType: r.Header.Get("Content-Type"), BodySHA256: hex.EncodeToString(sum[:]), BodyBytes: len(body),
		Outcome: "held",
	}
	if strings.HasPrefix(rec.ContentType, "application/cloudevents+json") {
		var ev struct{ ID, Source, Type, Time string }
		if json.Unmarshal(body, &ev) == nil {
			rec.ID, rec.Source, rec.Type, rec.EventTime = ev.ID, ev.Source, ev.Type, ev.Time
		}
	}
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "kn-forward-") {
			rec.ForwardHeaders = append(rec.ForwardHeaders, k)
		}
	}
	rec.TokenAudience = audience(r.Header.Get("Authorization"))
	seq := s.add(rec)
	log.Printf("event id=%q source=%q path=%q proto=%s bytes=%d", rec.ID, rec.Source, rec.Path, rec.Proto, rec.BodyBytes)

	q := r.URL.Query()
	if hold, err := time.ParseDuration(q.Get("hold")); err == nil && hold > 0 {
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.end(seq, "canceled")
			return
		}
	}
	status := http.StatusOK
	if n, err := strconv.Atoi(q.Get("status")); err == nil && n >= 200 && n <= 599 {
		status = n
	}
	if q.Get("reply") == "1" {
		h := w.Header()
		h.Set("Ce-Specversion", "1.0")
		h.Set("Ce-Id", "reply-"+rec.ID)
		h.Set("Ce-Source", "/e2esink")
		h.Set("Ce-Type", "e2e.reply")
		h.Set("Content-Type", rec.ContentType)
		w.WriteHeader(status)
		_, _ = w.Write(body)
	} else {
		w.WriteHeader(status)
	}
	s.end(seq, "answered")
}

// audience returns the aud claim of a "Bearer <JWT>" value, "" if none.
func audience(authorization string) string {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	parts := strings.Split(token, ".")
	if !ok || len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil {
		return strings.Join(many, ",")
	}
	return ""
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	s := &sink{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /records", s.serveRecords)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/", s.serveEvent)
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	log.Printf("e2esink listening on :%s", port)
	log.Fatal(srv.ListenAndServe())
}
