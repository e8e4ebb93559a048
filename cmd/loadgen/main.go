// Command loadgen is the scenario bench of the event-forwarding proxy
// (make bench): it runs the proxy binary and its peers on loopback against
// slow and fast sinks and writes results, plots and docs/benchmarks.md.
// All logic lives in test/bench/load.
package main

import (
	"os"

	"knative.dev/event-forwarding-proxy/test/bench/load"
)

func main() {
	os.Exit(load.Main(os.Args[1:], os.Stdout, os.Stderr))
}
