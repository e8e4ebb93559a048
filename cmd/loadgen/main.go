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
