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

package demo

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
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

const usage = `usage: demo [flags]            run the demo (make demo)
       demo sink [flags]       serve the slow sink (helper)
       demo sender [flags]     fire the sources (helper)

Run "demo -h", "demo sink -h" or "demo sender -h" for the flags.
`

// Main runs the demo's command line and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd, f := "demo", cmdRun
	if len(args) > 0 {
		switch args[0] {
		case "sink":
			cmd, f, args = "demo sink", cmdSink, args[1:]
		case "sender":
			cmd, f, args = "demo sender", cmdSender, args[1:]
		case "help":
			fmt.Fprint(stderr, usage)
			return 2
		}
	}
	if err := f(ctx, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p Params
	fs.StringVar(&p.ProxyBin, "proxy", "bin/proxy", "the cmd/proxy binary")
	fs.IntVar(&p.Sources, "sources", 2000, "events fired at every tick")
	fs.DurationVar(&p.Period, "period", 5*time.Second, "time between ticks")
	fs.DurationVar(&p.Hold, "hold", 20*time.Second, "how long the sink holds each call")
	fs.DurationVar(&p.Phase, "phase", 25*time.Second, "how long each phase (direct, via proxy) fires events")
	fs.DurationVar(&p.Every, "every", time.Second, "refresh interval of the view")
	plain := fs.Bool("plain", false, "one line per refresh, even on a terminal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q\n%s", fs.Args(), usage)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if p.ProxyBin, err = filepath.Abs(p.ProxyBin); err != nil {
		return err
	}
	p.Self, p.Out, p.Live = []string{self}, stdout, !*plain && isTerminal(stdout)
	_, err = Run(ctx, p)
	return err
}

// isTerminal reports whether w is a character device (a terminal) other
// than a dumb one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func cmdSink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	hold := fs.Duration("hold", 20*time.Second, "how long each call is held")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, listenPrefix+ln.Addr().String())
	return sink.Serve(ctx, ln, sink.New(sink.Params{Hold: *hold}))
}

func cmdSender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sender", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p SenderParams
	fs.StringVar(&p.Sink, "sink", "", "the sink's base URL (required)")
	fs.StringVar(&p.Proxy, "proxy", "", "the proxy's base URL; empty sends directly")
	fs.IntVar(&p.Sources, "sources", 2000, "events fired at every tick")
	fs.DurationVar(&p.Period, "period", 5*time.Second, "time between ticks")
	fs.DurationVar(&p.Duration, "duration", 25*time.Second, "how long to fire events")
	fs.DurationVar(&p.Every, "every", 200*time.Millisecond, "reporting interval")
	fs.DurationVar(&p.Window, "window", time.Second, "how far back a report's hand-off percentiles look")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return RunSender(ctx, p, stdout)
}
