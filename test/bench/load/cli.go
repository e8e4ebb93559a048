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
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/naive"
	"knative.dev/event-forwarding-proxy/test/bench/profiled"
	"knative.dev/event-forwarding-proxy/test/bench/report"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sender"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

const usage = `usage: loadgen <command> [flags]

commands:
  run      run the scenario bench and write results JSON
  report   write plots and docs/benchmarks.md's tables from results JSON
  sink     serve the slow and fast sink (helper)
  naive    serve the naive httputil.ReverseProxy peer (helper)
  sender   run the seed scenario's sender (helper)
  proxy-pprof
           serve the proxy in-process with pprof, configured like cmd/proxy (helper)

Run "loadgen <command> -h" for a command's flags.
`

// Main runs the load generator's command line; it returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"run": cmdRun, "report": cmdReport, "sink": cmdSink, "naive": cmdNaive, "sender": cmdSender,
		"proxy-pprof": func(ctx context.Context, _ []string, _, _ io.Writer) error { return profiled.Serve(ctx) },
	}
	f, ok := cmds[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err := f(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "loadgen %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func cmdRun(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.ProxyBin, "proxy", "bin/proxy", "the cmd/proxy binary under test")
	fs.StringVar(&cfg.Out, "out", "docs/bench/results.json", "results JSON, written after every run")
	fs.Float64Var(&cfg.Scale, "scale", 1, "shrink counts and durations (0.1 for a quick run)")
	n := fs.String("n", "", "held-call counts over h2c, comma-separated (default 1000,10000,50000,100000 times -scale; none for no runs)")
	n1 := fs.String("n-http1", "", "held-call counts over HTTP/1.1 (default 1000,5000,9000 times -scale; none for no runs)")
	peers := fs.String("peers", "", "peers, comma-separated: proxy,haproxy,naive,naive-default,nginx,proxy-pprof (default all but proxy-pprof)")
	scen := fs.String("scenarios", "", "scenarios, comma-separated: held,throughput,burst,seed (default all)")
	fs.StringVar(&cfg.Nginx, "nginx", "", `nginx binary (default /usr/sbin/nginx when installed; "off" to leave it out)`)
	fs.StringVar(&cfg.HAProxy, "haproxy", "", `haproxy binary (default /usr/sbin/haproxy when installed; "off" to leave it out)`)
	fs.BoolVar(&cfg.NoPin, "no-pin", false, "do not pin processes to cores")
	penv := fs.String("proxy-env", "", "extra environment of the proxy peers, comma-separated K=V (experiments: GOGC=50)")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "write CPU and heap profiles of the proxy-pprof peer and the load generator here")
	fs.IntVar(&cfg.BurstEvents, "burst-events", 0, fmt.Sprintf("events of each burst of the burst scenario (default 5000 times -scale; at most %d)", maxBurstEvents))
	fs.IntVar(&cfg.HeaderBytes, "header-bytes", 0, "add a header of about this many bytes to every held call (0: none; at most the proxy's FORWARD_MAX_HEADER_BYTES)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.HeaderBytes < 0 {
		return fmt.Errorf("-header-bytes: want 0 or more")
	}
	if cfg.BurstEvents < 0 || cfg.BurstEvents > maxBurstEvents {
		return fmt.Errorf("-burst-events: want 0 to %d", maxBurstEvents)
	}
	var err error
	if cfg.HeldH2C, err = ints(*n); err != nil {
		return fmt.Errorf("-n: %w", err)
	}
	if cfg.HeldHTTP1, err = ints(*n1); err != nil {
		return fmt.Errorf("-n-http1: %w", err)
	}
	cfg.Peers, cfg.Scenarios, cfg.ProxyEnv = list(*peers), list(*scen), list(*penv)
	cfg.Log = stderr
	if abs, err := filepath.Abs(cfg.ProxyBin); err == nil {
		cfg.ProxyBin = abs
	}
	_, err = Run(ctx, cfg)
	return err
}

func cmdReport(_ context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "docs/bench/results.json", "results JSON")
	doc := fs.String("doc", "docs/benchmarks.md", "Markdown file whose generated blocks are rewritten")
	plotDir := fs.String("plots", "docs/bench", "folder of the PNG plots")
	gobench := fs.String("gobench", "", "file with the Go benchmarks' output (empty: keep the block as is)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := result.Read(*in)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*plotDir, 0o755); err != nil {
		return err
	}
	if err := report.Plots(res, *plotDir); err != nil {
		return err
	}
	d := report.Doc{Results: res}
	if rel, err := filepath.Rel(filepath.Dir(*doc), *plotDir); err == nil {
		d.PlotDir = filepath.ToSlash(rel)
	}
	if *gobench != "" {
		b, err := os.ReadFile(*gobench)
		if err != nil {
			return err
		}
		d.GoBench = string(b)
	}
	return report.WriteDoc(*doc, d)
}

// listen opens addr, raises the open-file limit and announces the address
// on stdout for the parent.
func listen(addr string, stdout io.Writer) (net.Listener, error) {
	if _, err := RaiseNofile(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stdout, listenPrefix+ln.Addr().String())
	return ln, nil
}

func cmdSink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	hold := fs.Duration("hold", time.Minute, "how long a held call lasts when it names no ?d=")
	streams := fs.Int("max-streams", 100000, "HTTP/2 streams per connection")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := listen(*addr, stdout)
	if err != nil {
		return err
	}
	return sink.Serve(ctx, ln, sink.New(sink.Params{Hold: *hold, MaxConcurrentStreams: *streams}))
}

func cmdNaive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("naive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	var p naive.Params
	fs.StringVar(&p.Outbound, "outbound", naive.H2C, "h2c, http1 or default (a clone of http.DefaultTransport)")
	fs.IntVar(&p.MaxConcurrentStreams, "max-streams", 100000, "HTTP/2 streams per inbound connection")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := listen(*addr, stdout)
	if err != nil {
		return err
	}
	return naive.Serve(ctx, ln, p)
}

func cmdSender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sender", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p sender.Params
	fs.StringVar(&p.Mode, "mode", sender.Direct, "direct, proxy-async or through-peer")
	fs.StringVar(&p.Sink, "sink", "", "slow sink base URL")
	fs.StringVar(&p.Proxy, "proxy", "", "the proxy's or peer's base URL (proxy-async, through-peer)")
	fs.IntVar(&p.Sources, "sources", 5000, "events fired at every tick")
	fs.DurationVar(&p.Period, "period", 10*time.Second, "time between ticks")
	fs.DurationVar(&p.Hold, "hold", time.Minute, "how long the sink holds each call")
	fs.DurationVar(&p.Duration, "duration", 90*time.Second, "length of the run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := RaiseNofile(); err != nil {
		return err
	}
	return sender.Run(ctx, p, stdout)
}

// ints parses a comma-separated list of counts; "" means the default
// (nil) and "none" no runs at all.
func ints(s string) ([]int, error) {
	if s == "none" {
		return []int{}, nil
	}
	var out []int
	for _, f := range list(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
