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
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"

	"knative.dev/event-forwarding-proxy/test/bench/profiled"
)

// profiler takes the profiles of one run when Config.ProfileDir is set:
// the load generator's own CPU and, for the proxy-pprof peer, the peer's.
type profiler struct {
	dir, tag string
	peer     *child // nil unless the peer serves pprof
	self     *os.File
	client   *http.Client
}

func (o *orch) profiler(peer string, p *child, tag string) *profiler {
	if o.cfg.ProfileDir == "" {
		return nil
	}
	pr := &profiler{dir: o.cfg.ProfileDir, tag: tag, client: o.control}
	if peer == PeerProxyProfiled {
		pr.peer = p
	}
	return pr
}

// startCPU starts CPU profiles named what.
func (pr *profiler) startCPU(ctx context.Context, what string) {
	if pr == nil {
		return
	}
	_ = os.MkdirAll(pr.dir, 0o755)
	if f, err := os.Create(pr.path("loadgen-cpu-" + what)); err == nil && pprof.StartCPUProfile(f) == nil {
		pr.self = f
	}
	if pr.peer != nil {
		_ = pr.post(ctx, profiled.PathCPUStart+"?file="+url.QueryEscape(pr.path("proxy-cpu-"+what)))
	}
}

// stopCPU stops what startCPU started.
func (pr *profiler) stopCPU(ctx context.Context) {
	if pr == nil {
		return
	}
	if pr.self != nil {
		pprof.StopCPUProfile()
		_ = pr.self.Close()
		pr.self = nil
	}
	if pr.peer != nil {
		_ = pr.post(ctx, profiled.PathCPUStop)
	}
}

// heap writes the peer's heap profile after a collection, and its
// goroutine count profile.
func (pr *profiler) heap(ctx context.Context) {
	if pr == nil || pr.peer == nil {
		return
	}
	_ = pr.post(ctx, profiled.PathGC)
	for name, q := range map[string]string{"proxy-heap": "heap", "proxy-goroutine": "goroutine"} {
		_ = pr.get(ctx, "/debug/pprof/"+q, pr.path(name))
	}
	// The text form ends with runtime.MemStats: heap, stacks and the rest.
	_ = pr.get(ctx, "/debug/pprof/heap?debug=1", filepath.Join(pr.dir, "proxy-memstats-"+pr.tag+".txt"))
}

func (pr *profiler) path(name string) string {
	return filepath.Join(pr.dir, name+"-"+pr.tag+".pb.gz")
}

func (pr *profiler) post(ctx context.Context, path string) error {
	return pr.do(ctx, http.MethodPost, path, io.Discard)
}

func (pr *profiler) get(ctx context.Context, path, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return pr.do(ctx, http.MethodGet, path, f)
}

func (pr *profiler) do(ctx context.Context, method, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+pr.peer.MetricsAddr+path, nil)
	if err != nil {
		return err
	}
	resp, err := pr.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
