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

package heartbeats

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// scheduler runs one ticker per source and a bounded number of sends.
type scheduler struct {
	sendCtx     context.Context // outlives the serving context by the drain
	cancelSends context.CancelFunc
	send        func(context.Context, Source, uint64) bool
	sources     func(int) // told the number of sources on every change
	slots       chan struct{}
	logger      *zap.SugaredLogger
	inflight    sync.WaitGroup

	mu     sync.Mutex
	runs   map[string]*run
	closed bool
}

// run is one source's ticker.
type run struct {
	src  Source
	seq  uint64 // the last sequence number sent; carried over on update
	stop chan struct{}
	done chan struct{}
}

func newScheduler(ctx context.Context, maxInflight int, send func(context.Context, Source, uint64) bool,
	sources func(int), logger *zap.SugaredLogger) *scheduler {
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &scheduler{
		sendCtx: sendCtx, cancelSends: cancel, send: send, sources: sources,
		slots: make(chan struct{}, max(maxInflight, 1)), logger: logger, runs: map[string]*run{},
	}
}

// set starts src, or restarts it with its new sink and period.
func (s *scheduler) set(src Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var seq uint64
	if old, ok := s.runs[src.Key()]; ok {
		if old.src.Sink.String() == src.Sink.String() && old.src.Period == src.Period {
			return
		}
		seq = old.halt()
	}
	r := &run{src: src, seq: seq, stop: make(chan struct{}), done: make(chan struct{})}
	s.runs[src.Key()] = r
	go s.loop(r)
	s.sources(len(s.runs))
}

// remove stops the source named key, if it runs.
func (s *scheduler) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[key]; ok {
		r.halt()
		delete(s.runs, key)
		s.sources(len(s.runs))
	}
}

// halt stops r's ticker and returns its last sequence number.
func (r *run) halt() uint64 {
	close(r.stop)
	<-r.done
	return r.seq
}

func (s *scheduler) loop(r *run) {
	defer close(r.done)
	t := time.NewTicker(r.src.Period)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.seq++
		select {
		case s.slots <- struct{}{}:
		default:
			s.logger.Errorw("Heartbeat skipped: every send slot is taken (MAX_INFLIGHT_SENDS)",
				zap.String("source", r.src.Key()), zap.Uint64("sequence", r.seq), zap.Int("slots", cap(s.slots)))
			continue
		}
		s.inflight.Add(1)
		go func(src Source, seq uint64) {
			defer func() { <-s.slots; s.inflight.Done() }()
			s.send(s.sendCtx, src, seq)
		}(r.src, r.seq)
	}
}

// drain stops every ticker, waits for the running sends at most timeout,
// then cancels those left; it logs how many were cut.
func (s *scheduler) drain(timeout time.Duration) {
	s.mu.Lock()
	s.closed = true
	for k, r := range s.runs {
		r.halt()
		delete(s.runs, k)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.logger.Errorw("Shutting down with sends still running: cancelling them", zap.Int("sends", len(s.slots)), zap.Duration("waited", timeout))
		s.cancelSends()
		<-done
	}
	s.cancelSends()
}
