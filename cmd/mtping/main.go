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

// Command mtping is the multi-tenant PingSource adapter that sends through
// the event-forwarding proxy: a drop-in for the image of upstream's
// pingsource-mt-adapter Deployment (docs/mtping.md).
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"knative.dev/event-forwarding-proxy/adapter/mtping/process"

	// Roots of its own for https sinks: the release's image holds no CA
	// files, and Go uses these only when it finds none.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	os.Exit(run())
}

// run reads the flag, then runs the adapter until SIGTERM or SIGINT and
// its drain (process.Run, which reads the environment).
func run() int {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file, used outside a pod (if unset, $KUBECONFIG)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return process.Run(ctx, *kubeconfig, os.LookupEnv)
}
