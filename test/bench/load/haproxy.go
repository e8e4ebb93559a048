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

package load

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// haproxyConfig is the peer's configuration; haproxy.cfg gives the reason
// for each setting. It reads BENCH_BIND, BENCH_PROTOCOL and BENCH_DIR
// from the environment, so that the file in the repo runs as it is.
//
//go:embed haproxy.cfg
var haproxyConfig []byte

// haproxyPath is HAProxy's binary when installed, else "".
func haproxyPath(configured string) string {
	return installedPath(configured, "/usr/sbin/haproxy")
}

// startHAProxy runs HAProxy in the foreground as one process (no master),
// so that its pid is the one whose memory and CPU are read.
func (o *orch) startHAProxy(ctx context.Context, protocol string) (*child, error) {
	bin := haproxyPath(o.cfg.HAProxy)
	if bin == "" {
		return nil, fmt.Errorf("haproxy is not installed")
	}
	dir, err := os.MkdirTemp("", "bench-haproxy")
	if err != nil {
		return nil, err
	}
	o.cleanup = append(o.cleanup, func() { _ = os.RemoveAll(dir) })
	conf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(conf, haproxyConfig, 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := []string{"BENCH_BIND=" + addr, "BENCH_PROTOCOL=" + protocol, "BENCH_DIR=" + dir}
	c, err := o.start(ctx, childSpec{name: PeerHAProxy, argv: []string{bin, "-db", "-f", conf}, env: env, cpu: o.peerCPU})
	if err != nil {
		return nil, err
	}
	c.Addr = addr
	if err := waitReady(ctx, c, tcpOpen(c.Addr)); err != nil {
		c.stop(time.Second)
		return nil, err
	}
	return c, nil
}
