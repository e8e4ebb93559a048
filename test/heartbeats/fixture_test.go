//go:build integration

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

package heartbeats

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/adapter/heartbeats"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

const systemNamespace = "knative-eventing"

// sink records the heartbeats it receives.
type sink struct{ *testproc.Sink }

func newSink(t *testing.T) sink { return sink{testproc.NewSink(t, nil)} }

// heartbeats returns the sequence numbers received, by ce-source, and
// what was wrong with each request that was no well-formed heartbeat.
func (s sink) heartbeats() (seqs map[string][]uint64, bad []string) {
	seqs = map[string][]uint64{}
	for _, r := range s.Requests() {
		var data struct {
			Sequence uint64 `json:"sequence"`
		}
		err := json.Unmarshal(r.Body, &data)
		src := r.Header.Get("Ce-Source")
		ns := strings.Split(src, "/")
		switch {
		case err != nil:
			bad = append(bad, "body "+string(r.Body))
		case r.Header.Get("Ce-Type") != heartbeats.EventType:
			bad = append(bad, "type "+r.Header.Get("Ce-Type"))
		case len(ns) < 5 || r.Header.Get("Kn-Namespace") != ns[4]:
			bad = append(bad, "Kn-Namespace "+strings.Join(r.Header.Values("Kn-Namespace"), ",")+" for "+src)
		}
		seqs[src] = append(seqs[src], data.Sequence)
	}
	return seqs, bad
}

// received returns how many heartbeats of each source arrived.
func (s sink) received() map[string]int {
	seqs, _ := s.heartbeats()
	n := map[string]int{}
	for k, v := range seqs {
		n[k] = len(v)
	}
	return n
}

// total is the number of heartbeats received, of every source.
func (s sink) total() int { return s.Count() }

// adapterProc is a running cmd/heartbeats.
type adapterProc struct {
	*testproc.Proc
	metricsURL string
}

// startAdapter runs the adapter against kubeconfig's API server, with env
// added.
func startAdapter(t *testing.T, kubeconfig string, env ...string) *adapterProc {
	t.Helper()
	metricsPort := testproc.FreePort(t)
	cmd := exec.Command(bins.heartbeats)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		"NAMESPACE="+systemNamespace,
		"SYSTEM_NAMESPACE="+systemNamespace,
		"HEALTH_PROBES=false",
		"PROFILING_PORT="+strconv.Itoa(testproc.FreePort(t)),
		`K_OBSERVABILITY_CONFIG={"metrics":{"protocol":"prometheus"}}`,
		"METRICS_PROMETHEUS_HOST=127.0.0.1",
		"METRICS_PROMETHEUS_PORT="+strconv.Itoa(metricsPort),
		`K_LOGGING_CONFIG={"zap-logger-config":"{\"level\":\"debug\",\"encoding\":\"json\",\"outputPaths\":[\"stdout\"],\"errorOutputPaths\":[\"stderr\"],\"encoderConfig\":{\"messageKey\":\"msg\",\"levelKey\":\"level\"}}"}`,
		"DRAIN_TIMEOUT=20s",
		"GORACE=halt_on_error=1",
	)
	cmd.Env = append(cmd.Env, env...)
	return &adapterProc{Proc: testproc.Start(t, "the adapter", cmd),
		metricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"}
}

// metric sums a metric's samples with labels want, as the adapter serves
// it through the exporter K_OBSERVABILITY_CONFIG chose.
func (p *adapterProc) metric(name string, want map[string]string) float64 {
	fams, err := testproc.Scrape(p.metricsURL)
	if err != nil {
		return -1
	}
	return testproc.Value(fams, name, want)
}

// putForwarding writes config-event-forwarding.
func putForwarding(t *testing.T, kc kubernetes.Interface, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cms := kc.CoreV1().ConfigMaps(systemNamespace)
	cm, err := cms.Get(ctx, config.ForwardingConfigName, metav1.GetOptions{})
	if err != nil {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.ForwardingConfigName}, Data: data}, metav1.CreateOptions{})
	} else {
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// createSource makes namespace ns and a heartbeat source in it.
func createSource(t *testing.T, kc kubernetes.Interface, ns, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	_, _ = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{heartbeats.SourceLabel: "true"}},
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// gaps returns the sequence numbers from 1 to the largest received that
// never arrived, and how many arrived more than once.
func gaps(seqs []uint64) (missing []uint64, dups int) {
	s := slices.Clone(seqs)
	slices.Sort(s)
	var want uint64 = 1
	for i, v := range s {
		if i > 0 && v == s[i-1] {
			dups++
			continue
		}
		for ; want < v; want++ {
			missing = append(missing, want)
		}
		want = v + 1
	}
	return missing, dups
}

// stop sends SIGTERM and waits for a clean exit.
func (p *adapterProc) stop(t *testing.T, within time.Duration) {
	t.Helper()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if err := p.Wait(within); err != nil {
		t.Errorf("the adapter exited with %v after SIGTERM", err)
	}
}
