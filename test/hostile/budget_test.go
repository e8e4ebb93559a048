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

package hostile

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// The attacks on the memory budget (FORWARD_MEMORY_BUDGET_BYTES): calls
// the sink holds, each keeping what its caller sent, past a small budget.
// Every call reserves its header block (a few hundred bytes here, besides
// a large header) and an async call its body too.
const (
	// asyncBudget is the budget of the async-body attack: asyncFit events
	// of asyncBody fit, with their headers; the next does not. The heap
	// in use holds them and, between two collections, as much again of
	// garbage: well within heapSlack.
	asyncBudget = 16 << 20
	asyncBody   = 4 << 20 // FORWARD_MAX_EVENT_BYTES' default
	asyncFit    = asyncBudget/asyncBody - 1
	// asyncEvents: sent one after the other. A proxy without the budget
	// keeps them all, 256 MiB.
	asyncEvents = 64

	// headerBudget is the budget of the large-header attack, with
	// FORWARD_MAX_EVENT_BYTES at headerEventBytes (the least budget
	// allowed is that plus the 64 KiB header limit): at most headerFit
	// calls with a header of headerValue bytes fit.
	headerBudget     = 2 << 20
	headerEventBytes = 64 << 10
	headerValue      = 60000
	headerFit        = headerBudget / headerValue
	// headerCalls: sent at once, each held by the sink.
	headerCalls = 100
)

var (
	asyncBudgetEnv  = []string{"FORWARD_MEMORY_BUDGET_BYTES=" + strconv.Itoa(asyncBudget)}
	headerBudgetEnv = []string{
		"FORWARD_MEMORY_BUDGET_BYTES=" + strconv.Itoa(headerBudget),
		"FORWARD_MAX_EVENT_BYTES=" + strconv.Itoa(headerEventBytes),
	}
)

// answerOf is how an answer reads in the tally: a 503 overloaded with
// Retry-After is the refusal the budget makes.
func answerOf(resp *http.Response, err error) string {
	switch {
	case err != nil:
		return "no answer"
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Kn-Forward-Error") == "overloaded" && resp.Header.Get("Retry-After") != "":
		return "503 overloaded with Retry-After"
	default:
		return strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Kn-Forward-Error")))
	}
}

const refusedByBudget = "503 overloaded with Retry-After"

// asyncBodies: asyncEvents async events (Prefer: respond-async) of 4 MiB
// each, with their length declared, to the sink, which holds every
// delivery. The first asyncFit are accepted (202) and kept until
// delivered; past the budget each is refused 503 overloaded with
// Retry-After before its body is read, and the heap stays bounded.
//
// Every event goes on one h2c connection: what the caller had sent of a
// refused event's body before it saw the refusal arrives on a closed
// stream, and must not be taken for a flood of useless frames that would
// close the connection.
func asyncBodies(t testing.TB, a *arena) {
	body := bytes.Repeat([]byte("e"), asyncBody)
	var answers tally
	var errs []string
	client := testproc.H2CClient(t, 60*time.Second)
	defer client.CloseIdleConnections()
	for range asyncEvents {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.proc.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Kn-Forward-To", a.sink.URL+"/attack")
		req.Header.Set("Prefer", "respond-async")
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		} else if len(errs) < 3 {
			errs = append(errs, err.Error())
		}
		answers.add(answerOf(resp, err))
	}
	accepted, refused := answers.n["202"], answers.n[refusedByBudget]
	a.saw("%d events of 4 MiB, %d MiB budget: %s", asyncEvents, asyncBudget>>20, &answers)
	if accepted < 1 || accepted > asyncFit || accepted+refused != asyncEvents {
		t.Errorf("%d async events of %d MiB against a %d MiB budget: %s (errors %q); want at most %d × 202, every other one %s",
			asyncEvents, asyncBody>>20, asyncBudget>>20, &answers, errs, asyncFit, refusedByBudget)
	}
}

// largeHeaders: headerCalls synchronous calls at once, each with a header
// of headerValue bytes (within the 64 KiB limit) and no body, to the sink,
// which holds them. At most headerFit are held; the others are refused
// 503 overloaded with Retry-After at once. Once the sink lets the held
// ones go, they are answered.
func largeHeaders(t testing.TB, a *arena) {
	client := testproc.H2CClient(t, 60*time.Second)
	big := strings.Repeat("h", headerValue)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answers  tally
		answered atomic.Int64
	)
	for range headerCalls {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.proc.URL, http.NoBody)
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Kn-Forward-To", a.sink.URL+"/attack")
			req.Header.Set("X-Big", big)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			what := answerOf(resp, err)
			mu.Lock()
			answers.add(what)
			mu.Unlock()
			answered.Add(1)
		})
	}
	// Every call is either held by the sink or answered.
	settled := testproc.Poll(closeWait, func() bool { return answered.Load()+a.sink.attacks() >= headerCalls })
	held := a.sink.attacks()
	mu.Lock()
	refused := answers.n[refusedByBudget]
	before := answers.String()
	mu.Unlock()
	a.sink.Release()
	wg.Wait()
	a.saw("%d calls with a %d-byte header, %d MiB budget: %d held by the sink, answered before it let them go: %s; in all %s",
		headerCalls, headerValue, headerBudget>>20, held, before, &answers)
	if !settled {
		t.Errorf("after %s, %d of %d calls were neither held by the sink nor answered", closeWait, headerCalls-int(answered.Load()+held), headerCalls)
	}
	if held > headerFit || refused < headerCalls-headerFit {
		t.Errorf("%d calls with a %d-byte header against a %d MiB budget: %d held, %d refused %s; want at most %d held, the others refused",
			headerCalls, headerValue, headerBudget>>20, held, refused, refusedByBudget, headerFit)
	}
	if n := answers.n["200"] + answers.n[refusedByBudget]; n != headerCalls {
		t.Errorf("answers %s; want each held call's 200 once let go, every other one %s", &answers, refusedByBudget)
	}
}
