// Command demo is `make demo`: the seed scenario in small, with a live
// view of what a multi-tenant adapter holds when it sends directly to
// slow sinks and when it hands its events to the proxy. All logic lives in
// test/demo.
package main

import (
	"os"

	"knative.dev/event-forwarding-proxy/test/demo"
)

func main() {
	os.Exit(demo.Main(os.Args[1:], os.Stdout, os.Stderr))
}
