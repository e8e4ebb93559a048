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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The namespace and image docs/install.md's check (section 5) uses, and
// the cluster's image in its place: e2esink answers 200 and keeps what
// it got.
const (
	checkNamespace    = "demo"
	eventDisplayImage = "gcr.io/knative-releases/knative.dev/eventing/cmd/event_display"
)

// checkInstallDocCheck runs docs/install.md's section 5 as an operator
// would, on the installed proxy: its destination, then its event with a
// token through a port-forward to queue-proxy, and the pod's metrics. The
// answer is the destination's 200, not the proxy's own; the metrics are
// the proxy's; the destination got the event, without the proxy's
// headers.
func checkInstallDocCheck(ctx context.Context, t *testing.T) {
	t.Helper()
	removeCheckNamespace(ctx, t, true) // left by an earlier run
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		removeCheckNamespace(ctx, t, false)
	})
	images := "DOCBLOCK_IMAGES=" + eventDisplayImage + "=dev.local/e2esink:v1"
	if out, err := docBlockOutput("check-destination", images); err != nil {
		t.Fatalf("docs/install.md, block check-destination: %v\n%s", err, out)
	}
	out, err := docBlockOutput("check-event")
	if err != nil {
		t.Fatalf("docs/install.md, block check-event: %v\n%s", err, out)
	}
	for _, want := range []string{"HTTP/1.1 200 OK", "kn_forward_requests_total{", "kn_forward_capacity 900"} {
		if !strings.Contains(out, want) {
			t.Errorf("the check's output has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "kn-forward-error") {
		t.Errorf("the proxy answered the check itself:\n%s", out)
	}
	display := &sink{namespace: checkNamespace, service: "event-display"}
	var got []record
	for _, r := range display.records(ctx, t) {
		if r.ID == "1" && r.Source == "/install" {
			got = append(got, r)
		}
	}
	if len(got) != 1 || len(got[0].ForwardHeaders) != 0 {
		t.Errorf("the destination got %+v, want the event once, without Kn-Forward-* headers", got)
	}
}

// removeCheckNamespace deletes the check's namespace and, if wait, waits
// until it is gone: minutes, as Knative's objects in it are finalized.
func removeCheckNamespace(ctx context.Context, t *testing.T, wait bool) {
	t.Helper()
	namespaces := cluster.kube.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, checkNamespace, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatalf("namespace %s: %v", checkNamespace, err)
	}
	if !wait {
		return
	}
	eventually(t, 5*time.Minute, time.Second, func() string { return "namespace " + checkNamespace + " still there" }, func() bool {
		_, err := namespaces.Get(ctx, checkNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
