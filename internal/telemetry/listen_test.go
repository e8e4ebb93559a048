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

package telemetry

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestListenBindsEveryAddressOrNone(t *testing.T) {
	lns, err := Listen(t.Context(), &http.Server{Addr: "127.0.0.1:0"}, &http.Server{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lns) != 2 {
		t.Fatalf("%d listeners, want 2", len(lns))
	}
	taken := lns[1].Addr().String()
	for _, ln := range lns {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Errorf("%s not bound: %v", ln.Addr(), err)
			continue
		}
		_ = conn.Close()
	}
	_ = lns[0].Close()

	// The second address is taken: the first, bound before, is closed.
	_, err = Listen(t.Context(), &http.Server{Addr: "127.0.0.1:0"}, &http.Server{Addr: taken})
	if err == nil || !strings.Contains(err.Error(), taken) {
		t.Fatalf("Listen on a taken %s: %v, want an error naming it", taken, err)
	}
	_ = lns[1].Close()
}
