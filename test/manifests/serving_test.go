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

package manifests

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"knative.dev/pkg/apis"
	"knative.dev/serving/pkg/apis/autoscaling"
	servingcfg "knative.dev/serving/pkg/apis/config"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"knative.dev/serving/pkg/networking"

	"knative.dev/event-forwarding-proxy/config"
)

// The three scaling profiles: the same Service, differing in autoscaling.
const (
	asyncFile    = "config/400-proxy.yaml" // the default
	syncFile     = "config/sync/400-proxy.yaml"
	asyncKPAFile = "config/async-kpa/400-proxy.yaml"
	proxyName    = "event-forwarding-proxy"
	heldCalls    = "kn_forward_active_requests"
)

// loadService decodes a profile's Service and applies Knative's defaults
// to it, as serving's webhook does.
func loadService(t *testing.T, file string) *servingv1.Service {
	t.Helper()
	d := find(t, loadConfig(t), file, servingv1.SchemeGroupVersion.WithKind("Service"), proxyName)
	obj, err := decodeStrict(scheme(t), d)
	if err != nil {
		t.Fatal(err)
	}
	svc := obj.(*servingv1.Service)
	svc.SetDefaults(servingContext())
	return svc
}

// servingContext is the context of a create under Knative's default
// configuration (config-defaults, config-autoscaler, config-features).
func servingContext() context.Context {
	ctx := context.Background()
	ctx = servingcfg.ToContext(ctx, servingcfg.FromContextOrDefaults(ctx))
	return apis.WithinCreate(ctx)
}

// profileFiles are the three profiles' Services.
var profileFiles = []string{syncFile, asyncFile, asyncKPAFile}

func TestServicesPassKnativeValidation(t *testing.T) {
	for _, file := range profileFiles {
		t.Run(file, func(t *testing.T) {
			svc := loadService(t, file)
			// Warnings (securityContext advice) do not fail; errors do.
			if err := svc.Validate(servingContext()).Filter(apis.ErrorLevel); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// TestServiceSettings checks each profile against the proxy's own
// configuration code and the wire contract.
func TestServiceSettings(t *testing.T) {
	for _, file := range profileFiles {
		t.Run(file, func(t *testing.T) {
			svc := loadService(t, file)
			spec := svc.Spec.Template.Spec
			if len(spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(spec.Containers))
			}
			c := spec.Containers[0]
			env := containerEnv(c)
			memLimit := c.Resources.Limits.Memory().Value()
			port := c.Ports[0]
			proxy := proxyConfig(t, svc)
			timeout := time.Duration(*spec.TimeoutSeconds) * time.Second
			annotations := svc.Spec.Template.Annotations
			tests := []struct {
				name      string
				got, want any
			}{
				{name: "namespace", got: svc.Namespace, want: "knative-eventing"},
				{name: "visibility", got: svc.Labels["networking.knative.dev/visibility"], want: "cluster-local"},
				{name: "image", got: c.Image, want: "ko://knative.dev/event-forwarding-proxy/cmd/proxy"},
				// Offers go to the revision's private Service (queue-proxy).
				{name: "spread address", got: proxy.SpreadURL, want: "http://" + svc.Name + "-00001-private"},
				{name: "spread above", got: proxy.SpreadAbove, want: 40},
				{name: "service account", got: spec.ServiceAccountName, want: proxyName},
				{name: "port", got: port, want: corev1.ContainerPort{Name: "http1", ContainerPort: 8080}},
				{name: "timeoutSeconds", got: *spec.TimeoutSeconds, want: int64(600)},
				{name: "responseStartTimeoutSeconds", got: *spec.ResponseStartTimeoutSeconds, want: int64(600)},
				{name: "min-scale", got: annotations[autoscaling.MinScaleAnnotationKey], want: "2"},
				{name: "max-scale", got: annotations[autoscaling.MaxScaleAnnotationKey], want: "100"},
				{name: "FORWARD_AUTH", got: env["FORWARD_AUTH"], want: "oidc"},
				{name: "FORWARD_MAX_INFLIGHT is set", got: env["FORWARD_MAX_INFLIGHT"] != "", want: true},
				{name: "queue-proxy never queues", got: *spec.ContainerConcurrency >= int64(proxy.MaxInflight), want: true},
				{name: "held calls fit the proxy's memory budget", got: proxy.MaxInflight <= config.DefaultMaxInflight(memLimit), want: true},
				{name: "held calls and a full memory budget fit under GOMEMLIMIT", got: fitsMemory(proxy, memLimit), want: true},
				{name: "queue-proxy's memory request holds FORWARD_MAX_INFLIGHT sync calls", got: queueProxyFits(t, annotations, proxy.MaxInflight), want: true},
				{name: "memory request is the limit", got: c.Resources.Requests.Memory().Cmp(*c.Resources.Limits.Memory()), want: 0},
				{name: "GOMEMLIMIT near 90% of the limit", got: goMemLimitRatio(t, env["GOMEMLIMIT"], memLimit), want: 0.9},
				{name: "goroutines start with small stacks", got: env["GODEBUG"], want: config.ProxyGODEBUG},
				{name: "the proxy times out first", got: proxy.MaxTimeout < timeout, want: true},
				{name: "by at most a minute", got: timeout-proxy.MaxTimeout <= time.Minute, want: true},
				{name: "drain ends within the pod's grace period", got: proxy.DrainTimeout < timeout, want: true},
				{name: "metrics port is free in a Knative pod", got: knativePorts[proxy.MetricsPort], want: false},
				{name: "metrics port is scraped", got: annotations["prometheus.io/port"], want: strconv.Itoa(proxy.MetricsPort)},
				{name: "readiness", got: c.ReadinessProbe.HTTPGet.Path, want: "/readyz"},
				{name: "liveness", got: c.LivenessProbe.HTTPGet.Path, want: "/healthz"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					if diff := cmp.Diff(tc.want, tc.got); diff != "" {
						t.Errorf("(-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}

// queueProxyFits applies the queue-proxy sizing the manifests' comments
// give (measured on the one-node cluster, test/cluster/e2e's
// TestMemoryPerHeldCall): 6 MiB of its own and 68.8 KB per synchronous
// call held over HTTP/1.1, for n calls, within its memory request.
func queueProxyFits(t *testing.T, annotations map[string]string, n int) bool {
	t.Helper()
	q, err := resource.ParseQuantity(annotations[serving.QueueSidecarMemoryResourceRequestAnnotationKey])
	if err != nil {
		t.Fatalf("%s: %v", serving.QueueSidecarMemoryResourceRequestAnnotationKey, err)
	}
	return float64(6<<20)+float64(n)*68.8e3 <= float64(q.Value())
}

// containerEnv is c's environment as a map.
func containerEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// proxyConfig is what the proxy makes of svc's environment and memory
// limit, with PORT set from the container port and K_REVISION to the
// first revision's name, as Knative does.
func proxyConfig(t *testing.T, svc *servingv1.Service) *config.Proxy {
	t.Helper()
	c := svc.Spec.Template.Spec.Containers[0]
	env := containerEnv(c)
	env["PORT"] = strconv.Itoa(int(c.Ports[0].ContainerPort))
	env["K_REVISION"] = svc.Name + "-00001"
	proxy, err := config.ProxyFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, c.Resources.Limits.Memory().Value())
	if err != nil {
		t.Fatalf("the proxy refuses the manifest's environment: %v", err)
	}
	return proxy
}

// fitsMemory applies docs/operations.md's sizing to cfg: the process's own
// 22 MB, 32 KiB per held call (HTTP/1.1 callers, the most measured) and
// the memory budget full, counted 1.1 times, within 90 % of limit.
func fitsMemory(cfg *config.Proxy, limit int64) bool {
	need := 22e6 + float64(cfg.MaxInflight)*32768 + 1.1*float64(cfg.MemoryBudgetBytes)
	return need <= 0.9*float64(limit)
}

// knativePorts are bound in every Knative pod by queue-proxy (or reserved
// by serving's validation), so the proxy must not listen there.
var knativePorts = map[int]bool{
	networking.BackendHTTPPort:             true,
	networking.BackendHTTP2Port:            true,
	networking.QueueAdminPort:              true,
	networking.AutoscalingQueueMetricsPort: true,
	networking.UserQueueMetricsPort:        true,
	8008:                                   true, // profiling
}

// goMemLimitRatio returns GOMEMLIMIT as a fraction of limit, rounded to
// two places.
func goMemLimitRatio(t *testing.T, v string, limit int64) float64 {
	t.Helper()
	n, err := parseGoMemLimit(v)
	if err != nil || limit <= 0 {
		t.Fatalf("GOMEMLIMIT=%q, memory limit %d: %v", v, limit, err)
	}
	return math.Round(float64(n)/float64(limit)*100) / 100
}

// parseGoMemLimit reads GOMEMLIMIT's syntax: bytes, with an optional unit
// B, KiB, MiB, GiB or TiB.
func parseGoMemLimit(v string) (int64, error) {
	units := []struct {
		suffix string
		bytes  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			x, err := strconv.ParseInt(n, 10, 64)
			return x * u.bytes, err
		}
	}
	return strconv.ParseInt(v, 10, 64)
}

// TestProfilesDifferOnlyInAutoscaling keeps the three profiles in step:
// every setting but the autoscaling annotations and the async-kpa
// profile's reports (FORWARD_KPA_*) is the same.
func TestProfilesDifferOnlyInAutoscaling(t *testing.T) {
	strip := func(svc *servingv1.Service) *servingv1.Service {
		for k := range svc.Spec.Template.Annotations {
			if strings.HasPrefix(k, autoscaling.GroupName+"/") && k != autoscaling.MinScaleAnnotationKey {
				delete(svc.Spec.Template.Annotations, k)
			}
		}
		c := &svc.Spec.Template.Spec.Containers[0]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "FORWARD_KPA_") })
		return svc
	}
	asyncSvc := strip(loadService(t, asyncFile))
	for _, file := range []string{syncFile, asyncKPAFile} {
		if diff := cmp.Diff(strip(loadService(t, file)), asyncSvc); diff != "" {
			t.Errorf("%s differs from %s beyond autoscaling (-%s +async):\n%s", file, asyncFile, file, diff)
		}
	}
}

// TestAsyncKPAProfile checks the async-kpa profile against the async one
// and against Knative: the KPA's concurrency target is the async target
// in reports, the reports go to queue-proxy's port and end before its
// timeout, and nothing puts the activator in the path of a running pod.
func TestAsyncKPAProfile(t *testing.T) {
	svc := loadService(t, asyncKPAFile)
	annotations := svc.Spec.Template.Annotations
	proxy := proxyConfig(t, svc)
	asyncTarget, err := strconv.Atoi(loadService(t, asyncFile).Spec.Template.Annotations[autoscaling.TargetAnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.Duration(*svc.Spec.Template.Spec.TimeoutSeconds) * time.Second
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "class", got: annotations[autoscaling.ClassAnnotationKey], want: autoscaling.KPA},
		{name: "metric", got: annotations[autoscaling.MetricAnnotationKey], want: autoscaling.Concurrency},
		{name: "target, in reports", got: annotations[autoscaling.TargetAnnotationKey], want: strconv.Itoa(asyncTarget / proxy.KPACallsPerReport)},
		{name: "the async target is whole reports", got: asyncTarget % proxy.KPACallsPerReport, want: 0},
		{name: "utilization", got: annotations[autoscaling.TargetUtilizationPercentageKey], want: "100"},
		{name: "target burst capacity", got: annotations[autoscaling.TargetBurstCapacityKey], want: "0"},
		{name: "reports through queue-proxy", got: proxy.KPAReportURL, want: "http://127.0.0.1:" + strconv.Itoa(networking.BackendHTTPPort)},
		{name: "a report ends before queue-proxy's timeout", got: proxy.KPAReportMaxAge < timeout, want: true},
		{name: "reports fit queue-proxy's concurrency", got: int64(proxy.MaxInflight+proxy.MaxInflight/proxy.KPACallsPerReport+1) <= *svc.Spec.Template.Spec.ContainerConcurrency,
			want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLongerCallsNeedTheClusterMaximum pins what docs/install.md says:
// calls over 10 minutes need max-revision-timeout-seconds raised first.
func TestLongerCallsNeedTheClusterMaximum(t *testing.T) {
	tests := []struct {
		name       string
		maxTimeout string // config-defaults max-revision-timeout-seconds; "" is Knative's default
		timeout    int64
		wantErr    bool
	}{
		{name: "shipped timeout, default maximum", timeout: 600},
		{name: "an hour, default maximum", timeout: 3600, wantErr: true},
		{name: "an hour, maximum raised", maxTimeout: "3600", timeout: 3600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := map[string]string{}
			if tc.maxTimeout != "" {
				cm["max-revision-timeout-seconds"] = tc.maxTimeout
			}
			defaults, err := servingcfg.NewDefaultsConfigFromMap(cm)
			if err != nil {
				t.Fatal(err)
			}
			cfg := servingcfg.FromContextOrDefaults(context.Background())
			cfg.Defaults = defaults
			ctx := apis.WithinCreate(servingcfg.ToContext(context.Background(), cfg))

			svc := loadService(t, syncFile)
			svc.Spec.Template.Spec.TimeoutSeconds = &tc.timeout
			svc.Spec.Template.Spec.ResponseStartTimeoutSeconds = &tc.timeout
			fe := svc.Validate(ctx).Filter(apis.ErrorLevel) // a *FieldError: nil stays nil
			if (fe != nil) != tc.wantErr {
				t.Errorf("Validate = %v, want an error: %v", fe, tc.wantErr)
			}
		})
	}
}
