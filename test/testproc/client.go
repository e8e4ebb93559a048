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

package testproc

import (
	"net/http"
	"testing"
	"time"
)

// H2CClient is a client that speaks HTTP/2 with prior knowledge over
// plain TCP (h2c) on connections of its own, ignoring any proxy the
// environment names; each call ends after timeout, if not zero. Its idle
// connections close when the test ends (or by its CloseIdleConnections).
func H2CClient(tb testing.TB, timeout time.Duration) *http.Client {
	tr := &http.Transport{Proxy: nil, Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}
