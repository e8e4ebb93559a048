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
	"encoding/json"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	adapterv2 "knative.dev/eventing/pkg/adapter/v2"
	"knative.dev/eventing/pkg/observability"
	"knative.dev/eventing/pkg/reconciler/pingsource/resources"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/logging"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
	"knative.dev/event-forwarding-proxy/config"
)

const (
	adapterSettings = "config/300-pingsource-adapter-settings.yaml"
	settingsName    = "event-forwarding-pingsource-adapter"
)

// mtpingImageEnv is the environment the release's adapter image sets
// (hack/release.sh; TestRelease checks the archive): the Go runtime's
// setting, read at start-up only, and the system namespace until
// upstream's controller sets it.
var mtpingImageEnv = map[string]string{"GODEBUG": config.ProxyGODEBUG, "SYSTEM_NAMESPACE": "knative-eventing"}

// TestAdapterSettingsSurviveTheController runs what upstream's PingSource
// controller does to the adapter's Deployment on every reconcile (it sets
// the dispatcher container's env to its own list) and checks the adapter
// still starts with the operator's settings: the image's environment, the
// Deployment's as Eventing ships it, the controller's, and the adapter's
// ConfigMap, which it reads through the API (mtping.SettingsFirst).
func TestAdapterSettingsSurviveTheController(t *testing.T) {
	docs := loadConfig(t)
	s := scheme(t)
	_, d := adapterDeployment(t)
	obj, err := decodeStrict(s, find(t, docs, adapterSettings, corev1.SchemeGroupVersion.WithKind("ConfigMap"), settingsName))
	if err != nil {
		t.Fatal(err)
	}
	settings := obj.(*corev1.ConfigMap).Data
	if len(settings) == 0 {
		t.Fatalf("%s: no settings", adapterSettings)
	}
	if settingsName != mtping.SettingsConfigMap {
		t.Fatalf("the manifest's ConfigMap %s is not the one the adapter reads, %s", settingsName, mtping.SettingsConfigMap)
	}

	c := &d.Spec.Template.Spec.Containers[0]
	if c.Name != "dispatcher" {
		t.Fatalf("container %q, want upstream's dispatcher", c.Name)
	}
	// Before the controller's first reconcile the adapter has the image's
	// environment, the Deployment's as Eventing ships it and the ConfigMap.
	first, err := mtping.EnvFromLookup(mtping.SettingsFirst(settings, lookup(effectiveEnv(t, d))))
	if err != nil || first.SystemNamespace != d.Namespace {
		t.Errorf("before the controller: system namespace %q (%v), want %q", first.SystemNamespace, err, d.Namespace)
	}
	// The reconciler's own list, with the values it computes in a cluster.
	zapConfig := `{"level":"debug","encoding":"json"}`
	loggingJSON, err := logging.ConfigToJSON(&logging.Config{LoggingConfig: zapConfig})
	if err != nil {
		t.Fatal(err)
	}
	// What the controller writes from a config-leader-election that sets
	// nothing, as Eventing ships it.
	le, err := kle.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	cc := le.GetComponentConfig(mtping.Component)
	leJSON, err := adapterv2.LeaderElectionComponentConfigToJSON(&cc)
	if err != nil {
		t.Fatal(err)
	}
	c.Env = resources.MakeReceiveAdapterEnvVar(resources.Args{LeConfig: leJSON, NoShutdownAfter: 55, SinkTimeout: -1,
		ConfigEnvVars: []corev1.EnvVar{{Name: "K_LOGGING_CONFIG", Value: loggingJSON}, {Name: "K_OBSERVABILITY_CONFIG", Value: observabilityJSON(t)}}})

	env := effectiveEnv(t, d)
	got, err := mtping.EnvFromLookup(mtping.SettingsFirst(settings, lookup(env)))
	if err != nil {
		t.Fatalf("the adapter refuses its environment: %v", err)
	}
	if _, err := mtping.LeaderElectionFromSettings(settings); err != nil {
		t.Errorf("the adapter refuses its buckets and lease timings: %v", err)
	}
	drain, err := time.ParseDuration(settings["DRAIN_TIMEOUT"])
	if err != nil {
		t.Fatalf("DRAIN_TIMEOUT: %v", err)
	}
	if got.DrainTimeout != drain {
		t.Errorf("DrainTimeout = %v, want the ConfigMap's %v", got.DrainTimeout, drain)
	}
	if got.LogLevel != "" || got.ZapConfig != zapConfig {
		t.Errorf("LogLevel %q, ZapConfig %q; want no override and config-logging's %q as the controller passes it",
			got.LogLevel, got.ZapConfig, zapConfig)
	}
	if got.Upstream.Buckets != 1 || got.Upstream.LeaseDuration != time.Minute {
		t.Errorf("upstream's election %+v, want the controller's: 1 bucket, 60 s", got.Upstream)
	}
	if env["GODEBUG"] != config.ProxyGODEBUG {
		t.Errorf("GODEBUG = %q, want %q: the adapter's held sends would wait on the runtime's average stack", env["GODEBUG"], config.ProxyGODEBUG)
	}
	if _, ok := settings["GODEBUG"]; ok {
		t.Error("the ConfigMap sets GODEBUG: the runtime reads it at start-up only, from the environment")
	}
	if got.SystemNamespace != d.Namespace {
		t.Errorf("SystemNamespace = %q, want %q", got.SystemNamespace, d.Namespace)
	}
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if got.DrainTimeout >= grace {
		t.Errorf("DRAIN_TIMEOUT %v does not end within the grace period %v", got.DrainTimeout, grace)
	}
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// effectiveEnv is the environment the first container runs with: the
// image's (mtpingImageEnv), then env, which wins. Only what the
// Deployment uses is resolved: values, the pod's namespace and name.
func effectiveEnv(t *testing.T, d *appsv1.Deployment) map[string]string {
	t.Helper()
	env := maps.Clone(mtpingImageEnv)
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = d.Namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = d.Name + "-7d9f8b6c5-x2x4q"
		default:
			t.Fatalf("env %s: source %+v not resolved by this test", e.Name, e.ValueFrom)
		}
	}
	return env
}

// observabilityJSON is K_OBSERVABILITY_CONFIG as upstream's controller
// writes it from a default config-observability.
func observabilityJSON(t *testing.T) string {
	b, err := json.Marshal(observability.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
