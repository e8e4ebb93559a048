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

package adapter

import (
	"context"
	"net/http"
	"testing"
)

// BenchmarkSend is the sender's own cost per event on loopback: encoding,
// headers, the round trip through the shared pools, with a sink (or a
// stand-in proxy answering 202) that answers at once.
func BenchmarkSend(b *testing.B) {
	tests := []struct {
		name     string
		h1Only   bool
		h2cHosts []string
		forward  bool
	}{
		{name: "direct-http1", h1Only: true},
		{name: "direct-h2c", h2cHosts: []string{"127.0.0.1"}},
		{name: "proxy-async", forward: true},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			sink := newServerProto(b, tc.h1Only, nil)
			proxy := newServer(b, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusAccepted) })
			s := NewSender(SenderParams{SinkH2CHosts: tc.h2cHosts})
			if tc.forward {
				s.SetForwarding(forwardingTo(b, proxy))
			}
			target := Target{URL: sink.url(b), Namespace: "tenant"}
			e := testEvent("e")
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Send(context.Background(), target, e); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
