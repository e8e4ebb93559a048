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

package delivery

import (
	"net/http"
	"sync/atomic"
)

// TLSPool is net/http's transport for https destinations, replaced by a
// fresh one when the roots change. Closing idle connections would not be
// enough: one busy at the change would go back to the pool and serve new
// calls, trusted by roots that are gone. Calls running on the old
// transport finish there; its connections then close after their idle
// timeout, unused.
type TLSPool struct {
	cur          atomic.Pointer[http.Transport]
	build        func() *http.Transport
	stopRenewing func() // nil: the roots never change
}

func newTLSPool(build func() *http.Transport) *TLSPool {
	p := &TLSPool{build: build}
	p.cur.Store(build())
	return p
}

// RoundTrip sends req on the transport of the moment.
func (p *TLSPool) RoundTrip(req *http.Request) (*http.Response, error) {
	return p.cur.Load().RoundTrip(req)
}

// Transport returns the transport of the moment: to read its settings,
// or change them before the first call.
func (p *TLSPool) Transport() *http.Transport { return p.cur.Load() }

// CloseIdleConnections closes the idle connections of the transport of
// the moment.
func (p *TLSPool) CloseIdleConnections() { p.cur.Load().CloseIdleConnections() }

// Close closes the idle connections and stops following the roots: for a
// pool that is dropped while its roots live on.
func (p *TLSPool) Close() {
	if p.stopRenewing != nil {
		p.stopRenewing()
	}
	p.CloseIdleConnections()
}

// renew puts a fresh transport in place and closes the old one's idle
// connections.
func (p *TLSPool) renew() {
	p.cur.Swap(p.build()).CloseIdleConnections()
}
