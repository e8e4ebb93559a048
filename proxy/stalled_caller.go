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
	"context"
	"net/http"
	"time"
)

// stalledWriteGrace is how long, once a call is over (its deadline passed,
// the caller left or the drain cut it), a write to the caller may still
// block: plenty for the proxy's own short answer, while a caller that
// stopped reading a long answer lets go of its slot.
const stalledWriteGrace = 2 * time.Second

// releaseStalledCaller bounds the writes to the caller of w once ctx, the
// call's context, ends. The server has no write timeout (it would cut
// legitimate long answers), so without it a caller that stops reading
// holds its call, slot and destination connection for ever: the answer's
// copy stays blocked on the caller's full window, where the call's
// deadline does not reach. The returned func, deferred by the handler,
// clears the deadline again for the connection's next request.
func releaseStalledCaller(ctx context.Context, w http.ResponseWriter) (done func()) {
	rc := http.NewResponseController(w)
	set := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(set)
		_ = rc.SetWriteDeadline(time.Now().Add(stalledWriteGrace))
	})
	return func() {
		if stop() {
			return // ctx still running: no deadline was set
		}
		<-set
		_ = rc.SetWriteDeadline(time.Time{})
	}
}
