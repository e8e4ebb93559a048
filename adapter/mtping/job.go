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

package mtping

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/pkg/apis"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"

	"knative.dev/event-forwarding-proxy/adapter"
)

// parser reads schedules as upstream's adapter does: standard five-field
// cron, an optional leading seconds field, and descriptors such as @hourly
// and @every 2s; a CRON_TZ=<zone> prefix carries spec.timezone.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// errNotServed marks a PingSource the adapter does not fire: no sink yet,
// or a condition other than Deployed not True (see served).
var errNotServed = errors.New("no status.sinkUri, or a condition but Deployed not True")

// job is everything one PingSource needs to tick, built once per change of
// the source. Its spec is comparable, so that an update which changes
// nothing the adapter uses (a status heartbeat, a label) keeps the running
// schedule and its phase.
type job struct {
	key      types.NamespacedName
	spec     jobSpec
	schedule cron.Schedule
	// event is the template every tick clones, then gives a fresh id and
	// time.
	event  event.Event
	target adapter.Target
	// fire runs one tick; the adapter sets it.
	fire func()
	// due is the activation the cron runs next, in Unix nanoseconds: what
	// a tick's lateness counts from. The cron itself does not say when the
	// tick it runs was due, and a cron that runs late must show as late.
	due atomic.Int64
}

// jobSpec is what the adapter reads from a PingSource.
type jobSpec struct {
	schedule    string // with the CRON_TZ prefix when spec.timezone is set
	contentType string
	data        string
	dataBase64  string
	extensions  string // spec.ceOverrides.extensions as canonical JSON
	sink        string
	caCerts     string
	audience    string
	account     string // status.auth.serviceAccountName
}

// served says whether the adapter fires a PingSource with this status: its
// sink is resolved and every condition but Deployed is True. Deployed says
// whether the adapter's own Deployment has every replica available:
// Eventing marks it Unknown on every PingSource during each scale-up,
// rollout, or replica that cannot start, while the running replicas are
// the proof that the adapter is deployed. Conditions are read one by one,
// not through Eventing's condition set, so that a release whose set is
// smaller (no OIDCIdentityCreated) is read as it wrote them.
func served(s *sourcesv1.PingSourceStatus) bool {
	if s.SinkURI == nil {
		return false
	}
	if s.IsReady() {
		return true
	}
	sink := false
	for _, c := range s.Conditions {
		switch c.Type {
		case apis.ConditionReady, sourcesv1.PingSourceConditionDeployed:
		case sourcesv1.PingSourceConditionSinkProvided:
			sink = c.IsTrue()
		default:
			if !c.IsTrue() {
				return false
			}
		}
	}
	return sink
}

// newJob builds the job of src, or returns errNotServed (wrapped) when the
// adapter must not fire it, or another error when its spec cannot be used.
func newJob(src *sourcesv1.PingSource) (*job, error) {
	if !served(&src.Status) {
		return nil, errNotServed
	}
	spec := jobSpec{
		schedule:    src.Spec.Schedule,
		contentType: src.Spec.ContentType,
		data:        src.Spec.Data,
		dataBase64:  src.Spec.DataBase64,
		sink:        src.Status.SinkURI.String(),
		caCerts:     deref(src.Status.SinkCACerts),
		audience:    deref(src.Status.SinkAudience),
	}
	if src.Spec.Timezone != "" {
		spec.schedule = "CRON_TZ=" + src.Spec.Timezone + " " + spec.schedule
	}
	if src.Status.Auth != nil {
		spec.account = deref(src.Status.Auth.ServiceAccountName)
	}
	var ext map[string]string
	if o := src.Spec.CloudEventOverrides; o != nil && len(o.Extensions) > 0 {
		ext = o.Extensions
		b, err := json.Marshal(ext) // sorted keys
		if err != nil {
			return nil, err
		}
		spec.extensions = string(b)
	}

	schedule, err := parser.Parse(spec.schedule)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", spec.schedule, err)
	}
	e, err := newEvent(src, spec, ext)
	if err != nil {
		return nil, err
	}
	return &job{
		key:      types.NamespacedName{Namespace: src.Namespace, Name: src.Name},
		spec:     spec,
		schedule: schedule,
		event:    e,
		target: adapter.Target{
			URL:            src.Status.SinkURI.URL(),
			CACerts:        spec.caCerts,
			Audience:       spec.audience,
			Namespace:      src.Namespace,
			ServiceAccount: spec.account,
		},
	}, nil
}

// newEvent is the event template of a PingSource, as upstream's adapter
// makes it: type dev.knative.sources.ping, source
// /apis/v1/namespaces/<ns>/pingsources/<name>, the ceOverrides extensions,
// and spec.dataBase64 (decoded) or else spec.data with spec.contentType.
func newEvent(src *sourcesv1.PingSource, spec jobSpec, ext map[string]string) (event.Event, error) {
	e := event.New()
	e.SetType(sourcesv1.PingSourceEventType)
	e.SetSource(sourcesv1.PingSourceSource(src.Namespace, src.Name))
	for k, v := range ext {
		e.SetExtension(k, v)
	}
	var data []byte
	switch {
	case spec.dataBase64 != "":
		b, err := base64.StdEncoding.DecodeString(spec.dataBase64)
		if err != nil {
			return e, fmt.Errorf("spec.dataBase64: %w", err)
		}
		data = b
	case spec.data != "":
		data = []byte(spec.data)
	}
	if data != nil {
		if err := e.SetData(spec.contentType, data); err != nil {
			return e, fmt.Errorf("spec.data with content type %q: %w", spec.contentType, err)
		}
	}
	// Catch what would fail every tick (a bad extension name) once, here.
	probe := e.Clone()
	probe.SetID("probe")
	if err := probe.Validate(); err != nil {
		return e, fmt.Errorf("event: %w", err)
	}
	return e, nil
}

// deref is *p, or T's zero value when p is nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
