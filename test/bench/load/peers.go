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
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"knative.dev/event-forwarding-proxy/config"
)

// Peers: the proxies the bench compares.
const (
	// PeerProxy is this project's cmd/proxy binary.
	PeerProxy = "proxy"
	// PeerNaive is a plain httputil.ReverseProxy (package naive), h2c
	// both sides, or a tuned HTTP/1.1 pool for the HTTP/1.1 scenarios.
	PeerNaive = "naive"
	// PeerNaiveDefault is the same with a clone of http.DefaultTransport
	// outbound (throughput over HTTP/1.1 only).
	PeerNaiveDefault = "naive-default"
	// PeerProxyProfiled is the proxy's handler chain run in-process by a
	// helper with pprof (package profiled): for profiles, not figures.
	PeerProxyProfiled = "proxy-pprof"
	// PeerNginx is nginx with a fixed upstream, HTTP/1.1 keep-alive to the
	// sink (only when installed).
	PeerNginx = "nginx"
	// PeerHAProxy is HAProxy taking each call's destination from
	// Kn-Forward-To, h2c or HTTP/1.1 on both sides (only when installed).
	PeerHAProxy = "haproxy"
	// PeerDirect is no peer: the load generator calls the sink itself, the
	// baseline of the throughput scenario.
	PeerDirect = "direct"
)

// Protocols between the load generator and a peer, and from the peer to
// the sink (nginx speaks HTTP/1.1 to the sink whatever it is offered).
const (
	H2C   = "h2c"
	HTTP1 = "http1"
	// H2CAsync is h2c with Prefer: respond-async on every held call: the
	// proxy answers 202 and holds the delivery, the adapter's case.
	H2CAsync = "h2c-async"
)

// wire is the protocol spoken on the wire for a scenario's protocol.
func wire(protocol string) string {
	if protocol == H2CAsync {
		return H2C
	}
	return protocol
}

// holdsAsync reports whether peer can take an event with a 202 and hold
// its delivery itself: only this project's proxy can.
func holdsAsync(peer string) bool {
	return peer == PeerProxy || peer == PeerProxyProfiled
}

// Limits the proxy runs with in the bench: admission never the bottleneck,
// streams per HTTP/2 connection high so that 100k calls need few sockets.
const (
	benchMaxInflight = 250000
	benchMaxStreams  = 100000
)

// startSink starts a sink helper on the load generator's core.
func (o *orch) startSink(ctx context.Context) (*child, error) {
	return o.startSinkOn(ctx, o.loadCPU)
}

// startSinkOn starts a sink helper on core cpu.
func (o *orch) startSinkOn(ctx context.Context, cpu int) (*child, error) {
	argv := append(append([]string{}, o.cfg.Self...), "sink", "-addr", "127.0.0.1:0",
		"-max-streams", strconv.Itoa(benchMaxStreams))
	return o.start(ctx, childSpec{name: "sink", argv: argv, env: o.cfg.SelfEnv, cpu: cpu, listenLine: true})
}

// startPeer starts peer, speaking protocol to the load generator and (but
// for nginx) to the sink at sinkAddr, and waits until it is ready.
func (o *orch) startPeer(ctx context.Context, peer, protocol, sinkAddr string) (*child, error) {
	protocol = wire(protocol)
	switch peer {
	case PeerProxy:
		return o.startProxy(ctx, protocol, nil)
	case PeerProxyProfiled:
		return o.startProxyAs(ctx, PeerProxyProfiled, append(append([]string{}, o.cfg.Self...), "proxy-pprof"), protocol, o.cfg.SelfEnv)
	case PeerNaive, PeerNaiveDefault:
		outbound := protocol
		if peer == PeerNaiveDefault {
			outbound = "default"
		}
		argv := append(append([]string{}, o.cfg.Self...), "naive", "-addr", "127.0.0.1:0",
			"-outbound", outbound, "-max-streams", strconv.Itoa(benchMaxStreams))
		return o.start(ctx, childSpec{name: peer, argv: argv, env: o.cfg.SelfEnv, cpu: o.peerCPU, listenLine: true})
	case PeerNginx:
		return o.startNginx(ctx, protocol, sinkAddr)
	case PeerHAProxy:
		return o.startHAProxy(ctx, protocol)
	}
	return nil, fmt.Errorf("unknown peer %q", peer)
}

// startProxy starts the cmd/proxy binary with loopback destinations
// allowed and limits high enough for every scenario, plus env.
func (o *orch) startProxy(ctx context.Context, protocol string, env []string) (*child, error) {
	return o.startProxyAs(ctx, PeerProxy, []string{o.cfg.ProxyBin}, protocol, env)
}

func (o *orch) startProxyAs(ctx context.Context, name string, argv []string, protocol string, env []string) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	max := strconv.Itoa(benchMaxInflight)
	penv := append([]string{
		"PORT=" + strconv.Itoa(port),
		"METRICS_PORT=" + strconv.Itoa(mport),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8",
		"FORWARD_MAX_INFLIGHT=" + max,
		"FORWARD_MAX_INFLIGHT_PER_DESTINATION=" + max,
		"FORWARD_MAX_INFLIGHT_PER_TENANT=" + max,
		"FORWARD_TENANT_RESERVE=0",
		"FORWARD_H2_MAX_CONCURRENT_STREAMS=" + strconv.Itoa(benchMaxStreams),
		"FORWARD_DESTINATION_PROTOCOL=" + protocol,
		"FORWARD_LOG_LEVEL=warn",
		"GODEBUG=" + config.ProxyGODEBUG, // as the manifests run it
	}, env...)
	penv = append(penv, o.cfg.ProxyEnv...)
	c, err := o.start(ctx, childSpec{name: name, argv: argv, env: penv, cpu: o.peerCPU})
	if err != nil {
		return nil, err
	}
	c.Addr = "127.0.0.1:" + strconv.Itoa(port)
	c.MetricsAddr = "127.0.0.1:" + strconv.Itoa(mport)
	if err := waitReady(ctx, c, httpOK(c.URL()+"/healthz")); err != nil {
		c.stop(time.Second)
		return nil, err
	}
	return c, nil
}

// nginxPath is nginx's binary when installed, else "".
func nginxPath(configured string) string {
	return installedPath(configured, "/usr/sbin/nginx")
}

// installedPath is configured, or else def, when it is a file, and ""
// when neither is or configured is "off".
func installedPath(configured, def string) string {
	if configured == "off" {
		return ""
	}
	for _, p := range []string{configured, def} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// startNginx runs nginx, one worker, forwarding everything to the sink
// over HTTP/1.1 keep-alive; h2c inbound is HTTP/2 with prior knowledge
// on a plain listener. Destinations are fixed: nginx ignores Kn-Forward-To.
func (o *orch) startNginx(ctx context.Context, protocol, sinkAddr string) (*child, error) {
	bin := nginxPath(o.cfg.Nginx)
	if bin == "" {
		return nil, fmt.Errorf("nginx is not installed")
	}
	dir, err := os.MkdirTemp("", "bench-nginx")
	if err != nil {
		return nil, err
	}
	o.cleanup = append(o.cleanup, func() { _ = os.RemoveAll(dir) })
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	listen := "127.0.0.1:" + strconv.Itoa(port) + " backlog=4096"
	if protocol == H2C {
		listen += " http2"
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, listen, sinkAddr)), 0o644); err != nil {
		return nil, err
	}
	c, err := o.start(ctx, childSpec{name: PeerNginx, argv: []string{bin, "-p", dir, "-c", conf, "-e", "stderr"}, cpu: o.peerCPU})
	if err != nil {
		return nil, err
	}
	c.Addr = "127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(ctx, c, tcpOpen(c.Addr)); err != nil {
		c.stop(time.Second)
		return nil, err
	}
	return c, nil
}

// nginxConf is a single-worker nginx as a plain forwarding peer: no access
// log, keep-alive both sides, timeouts longer than any held call.
func nginxConf(dir, listen, sinkAddr string) string {
	r := strings.NewReplacer("DIR", dir, "LISTEN", listen, "SINK", sinkAddr)
	return r.Replace(`daemon off;
master_process on;
user root;
worker_processes 1;
worker_rlimit_nofile 20000;
pid DIR/nginx.pid;
error_log stderr error;
events { worker_connections 19500; multi_accept on; }
http {
  access_log off;
  client_body_temp_path DIR/body;
  proxy_temp_path DIR/proxy;
  fastcgi_temp_path DIR/fastcgi;
  uwsgi_temp_path DIR/uwsgi;
  scgi_temp_path DIR/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 600s;
  http2_max_concurrent_streams 100000;
  upstream sink {
    server SINK;
    keepalive 1024;
    keepalive_requests 10000000;
    keepalive_timeout 600s;
  }
  server {
    listen LISTEN;
    location / {
      proxy_pass http://sink;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 600s;
      proxy_send_timeout 600s;
    }
  }
}
`)
}
