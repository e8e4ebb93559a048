//go:build cluster

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

package e2e

import (
	"context"
	"testing"
	"time"
)

// BenchmarkOperatorUpgrade runs an Eventing upgrade through the Knative
// Operator with the drop-in in place: the Operator takes Eventing over at
// the cluster's release and docs/install.md's Operator block adds the
// project's adapter image; the KnativeEventing then goes to the previous
// release (the images of test/cluster/eventing-prev, which `make
// bench-cluster` builds and imports) and up again to the cluster's, as an
// operator upgrading Eventing through the Operator does. Ten PingSources
// fire every 5 s throughout. It logs each step's ticks (due, fired,
// missed, twice), reports the upgrade's missed and doubled ticks, and
// fails on a tick fired twice or an adapter without the project's image
// after a step. It runs once: `make bench-cluster` passes -benchtime 1x.
func BenchmarkOperatorUpgrade(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("the upgrade runs once (-benchtime 1x), not %d times", b.N)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	current, previous := eventingVersion(b), builtVersion(b, "eventing-prev")
	s := newSink(ctx, b, newNamespace(ctx, b, "opupgrade"))
	addOperatorSources(ctx, b, s, operatorBenchSchedule)
	b.Cleanup(func() {
		// The benchmarks after this one need the project installed again.
		stopOperator(b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := ensureInstalled(ctx); err != nil {
			b.Error(err)
		}
	})
	scaleOperator(ctx, b, 1)
	steps := newStepLog()
	operatorSourcesFiring(ctx, b, s, "installed with kubectl")
	start := time.Now()

	steps.mark("takeover, Operator block")
	apply(ctx, b, systemNamespace, knativeEventing(b, current, current))
	waitKnativeEventing(ctx, b)
	docBlock(b, "operator-install")
	waitAdapter(ctx, b, projectAdapterImage, adapterAccount, 0)
	waitKnativeEventing(ctx, b)
	operatorSourcesFiring(ctx, b, s, "the project's adapter, under the Operator")

	// Each release's every image but the adapter's, which the override
	// keeps the project's.
	move := func(step, version string) {
		steps.mark(step)
		apply(ctx, b, systemNamespace, knativeEventing(b, version, version))
		waitKnativeEventing(ctx, b)
		waitDeploymentImage(ctx, b, "eventing-controller", "dev.local/eventing-controller:"+version)
		waitDeploymentImage(ctx, b, "eventing-webhook", "dev.local/eventing-webhook:"+version)
		waitAdapter(ctx, b, projectAdapterImage, adapterAccount, 0)
		operatorSourcesFiring(ctx, b, s, step)
	}
	downgrade := "to " + knativeRelease(b, previous)
	upgrade := "upgrade to " + knativeRelease(b, current)
	move(downgrade, previous)
	move(upgrade, current)

	for _, c := range checkStepTicks(ctx, b, s, operatorTicks(operatorBenchTick), steps, start) {
		if c.step == upgrade {
			b.ReportMetric(float64(c.due-c.fired), "missed-ticks")
			b.ReportMetric(float64(c.twice), "twice-ticks")
		}
	}
}
