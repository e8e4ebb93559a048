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
	"net"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// NewConnLimitListener accepts at most max connections of ln at once
// (FORWARD_MAX_CONNECTIONS): each costs a file descriptor and buffers
// whether or not it carries a call, and admission counts calls only. A
// connection beyond the limit is closed as soon as it is accepted, so its
// caller learns at once and retries, rather than waiting in the listen
// queue; the refusals are logged at most once a second, with their count.
func NewConnLimitListener(ln net.Listener, max int, logger *zap.SugaredLogger) net.Listener {
	return &connLimitListener{Listener: ln, max: int64(max), refusals: newLineBudget(1, logger, "Refused connections beyond FORWARD_MAX_CONNECTIONS")}
}

type connLimitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	refusals *lineBudget
}

func (l *connLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		_ = c.Close()
		l.refusals.drop()
	}
}

// limitedConn gives its place back once, on its first Close.
type limitedConn struct {
	net.Conn
	l    *connLimitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
