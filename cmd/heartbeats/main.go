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

// Command heartbeats is a multi-tenant heartbeat source built on
// knative.dev/eventing/pkg/adapter/v2, forwarding through the
// event-forwarding proxy with one client option (docs/sources.md).
package main

import (
	"os"

	// Roots for https sinks signed by a public CA: the image holds the
	// binary only, no CA file.
	_ "golang.org/x/crypto/x509roots/fallback"
	adapterv2 "knative.dev/eventing/pkg/adapter/v2"
	"knative.dev/pkg/signals"

	"knative.dev/event-forwarding-proxy/adapter/heartbeats"
)

func main() {
	// The injector gives the shared main the API server client its OIDC
	// token provider needs, and the adapter its informers (KUBECONFIG or
	// --kubeconfig outside a pod, the service account inside one).
	ctx := adapterv2.WithInjectorEnabled(signals.NewContext())
	// The shared main serves its probes on :8080; HEALTH_PROBES=false
	// leaves them out, for several adapters on one host.
	if os.Getenv("HEALTH_PROBES") == "false" {
		ctx = adapterv2.WithHealthProbesDisabled(ctx)
	}
	adapterv2.MainWithContext(ctx, heartbeats.Component, heartbeats.NewEnv, heartbeats.NewAdapter)
}
