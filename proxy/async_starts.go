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
	"runtime"
	"sync"
)

// maxStartsPerTurn bounds the first attempts started in one turn of the
// starter: enough to keep up with any arrival rate (the turns come many
// hundred times a second under load), few enough that a burst's 202s are
// not queued behind its deliveries.
const maxStartsPerTurn = 64

// starts defers the first attempts of async events behind the goroutines
// ready to run, which under a burst are the hand-offs still waiting for
// the core: their 202s go out before their deliveries compete with them.
// A goroutine, alive while jobs wait, yields, then starts half the jobs
// waiting (at most maxStartsPerTurn), each on a goroutine of its own, so a
// delivery that dials or waits holds up no other.
type starts struct {
	mu      sync.Mutex
	waiting []*job
	running bool
}

// add queues j's first attempt, starting the starter if it is not running.
func (s *starts) add(a *Async, j *job) {
	s.mu.Lock()
	s.waiting = append(s.waiting, j)
	run := !s.running
	s.running = true
	s.mu.Unlock()
	if run {
		go s.run(a)
	}
}

func (s *starts) run(a *Async) {
	var turn [maxStartsPerTurn]*job
	for {
		runtime.Gosched()
		s.mu.Lock()
		n := copy(turn[:min((len(s.waiting)+1)/2, maxStartsPerTurn)], s.waiting)
		if n == 0 {
			s.waiting, s.running = nil, false
			s.mu.Unlock()
			return
		}
		clear(s.waiting[:n])
		s.waiting = s.waiting[n:]
		s.mu.Unlock()
		for i, j := range turn[:n] {
			turn[i] = nil
			go a.deliver(j)
		}
	}
}
