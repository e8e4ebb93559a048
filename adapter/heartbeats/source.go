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

// Package heartbeats is a small multi-tenant source built on
// knative.dev/eventing/pkg/adapter/v2 (its shared main, its environment
// configuration and its CloudEvents client), and the example of how any
// such source forwards through the event-forwarding proxy: one option on
// its client (package adapter/forwarding).
//
// Each source is a ConfigMap labelled
// sources.event-forwarding.knative.dev/heartbeats: "true", in any
// namespace, whose data names a sink and a period:
//
//	sink: http://display.tenant.svc.cluster.local
//	period: 10s
//
// One adapter serves every such ConfigMap: every period it sends the sink
// a dev.knative.sources.heartbeat event, counting from 1.
package heartbeats

import (
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// SourceLabel marks the ConfigMaps that are heartbeat sources.
const SourceLabel = "sources.event-forwarding.knative.dev/heartbeats"

// EventType is the type of every event sent.
const EventType = "dev.knative.sources.heartbeat"

// Bounds of a source's period: below a second the source would be a load
// generator, above a day nobody waits for it.
const (
	MinPeriod = time.Second
	MaxPeriod = 24 * time.Hour
)

// Source is one heartbeat source.
type Source struct {
	Namespace, Name string
	Sink            *url.URL
	Period          time.Duration
}

// Key names the source in logs and in the event's source attribute.
func (s Source) Key() string { return s.Namespace + "/" + s.Name }

// EventSource is the source attribute of its events.
func (s Source) EventSource() string {
	return "/apis/v1/namespaces/" + s.Namespace + "/configmaps/" + s.Name
}

// SourceFrom reads a source from its ConfigMap; an error says which key is
// wrong.
func SourceFrom(cm *corev1.ConfigMap) (Source, error) {
	s := Source{Namespace: cm.Namespace, Name: cm.Name}
	raw := cm.Data["sink"]
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return s, fmt.Errorf("sink %q: want an absolute http(s) URL", raw)
	}
	s.Sink = u
	p, err := time.ParseDuration(cm.Data["period"])
	if err != nil || p < MinPeriod || p > MaxPeriod {
		return s, fmt.Errorf("period %q: want a duration from %s to %s", cm.Data["period"], MinPeriod, MaxPeriod)
	}
	s.Period = p
	return s, nil
}
