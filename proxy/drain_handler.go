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

package proxy

import (
	"net/http"
	"sync/atomic"

	"knative.dev/pkg/network"

	"knative.dev/event-forwarding-proxy/delivery"
)

// Probe paths.
const (
	// HealthPath answers 200 while the process serves.
	HealthPath = "/healthz"
	// ReadyPath answers 200 until draining starts, then 503.
	ReadyPath = "/readyz"
)

// Drainer is the drain state of one proxy process.
type Drainer struct {
	draining atomic.Bool
}

// Drain starts draining: readiness fails and new calls are refused.
func (d *Drainer) Drain() { d.draining.Store(true) }

// Draining reports whether Drain was called.
func (d *Drainer) Draining() bool { return d.draining.Load() }

// NewProbeHandler answers probes and, once draining, refuses new calls with
// 503 draining so that callers retry on another pod while the calls this
// pod holds run to completion. Probes are requests without Kn-Forward-To:
// GET /healthz (liveness), GET /readyz and Kubernetes' kubelet and
// Knative's network probes (readiness).
func NewProbeHandler(d *Drainer, next http.Handler) http.Handler {
	return &probeHandler{d: d, next: next}
}

type probeHandler struct {
	d    *Drainer
	next http.Handler
}

func (h *probeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, forwarding := r.Header[delivery.HeaderForwardTo]; !forwarding && isProbe(r) {
		h.probe(w, r)
		return
	}
	if h.d.Draining() {
		writeError(w, ReasonDraining, "the proxy is shutting down; retry on another instance")
		return
	}
	h.next.ServeHTTP(w, r)
}

// probe answers a liveness or readiness probe.
func (h *probeHandler) probe(w http.ResponseWriter, r *http.Request) {
	if c := callOf(w, r); c != nil {
		c.probe = true
	}
	if r.URL.Path != HealthPath && h.d.Draining() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// isProbe reports whether r is a liveness or readiness probe.
func isProbe(r *http.Request) bool {
	return r.URL.Path == HealthPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) ||
		r.URL.Path == ReadyPath || network.IsKubeletProbe(r) || r.Header.Get(network.ProbeHeaderName) != ""
}
