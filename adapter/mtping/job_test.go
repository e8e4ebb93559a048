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
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
)

// pingSource is a Ready PingSource firing every 2 s to http://sink.tenant/,
// changed by the options.
func pingSource(ns, name string, opts ...func(*sourcesv1.PingSource)) *sourcesv1.PingSource {
	s := &sourcesv1.PingSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sourcesv1.PingSourceSpec{Schedule: "@every 2s", ContentType: "application/json", Data: `{"n":1}`},
	}
	u, _ := apis.ParseURL("http://sink.tenant/")
	s.Status.SinkURI = u
	s.Status.SetConditions(apis.Conditions{{Type: apis.ConditionReady, Status: corev1.ConditionTrue}})
	for _, o := range opts {
		o(s)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// conditions sets a PingSource's SinkProvided, Deployed and
// OIDCIdentityCreated conditions, and Ready from them, as Eventing's
// controller does.
func conditions(sink, deployed, oidc corev1.ConditionStatus) func(*sourcesv1.PingSource) {
	return func(s *sourcesv1.PingSource) {
		s.Status.SetConditions(nil)
		s.Status.InitializeConditions()
		m := sourcesv1.PingSourceCondSet.Manage(&s.Status)
		for typ, st := range map[apis.ConditionType]corev1.ConditionStatus{
			sourcesv1.PingSourceConditionSinkProvided:        sink,
			sourcesv1.PingSourceConditionDeployed:            deployed,
			sourcesv1.PingSourceConditionOIDCIdentityCreated: oidc,
		} {
			switch st {
			case corev1.ConditionTrue:
				m.MarkTrue(typ)
			case corev1.ConditionFalse:
				m.MarkFalse(typ, "Test", "")
			default:
				m.MarkUnknown(typ, "Test", "")
			}
		}
	}
}

func TestNewJob(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		next        time.Time // the schedule's first tick after at
		contentType string
		data        string
		ext         map[string]any
		ca, aud, sa string
	}
	tests := []struct {
		name    string
		src     *sourcesv1.PingSource
		want    want
		wantErr error // errNotServed, or any error when errAny
		errAny  bool
	}{{
		name: "every 2s with JSON data",
		src:  pingSource("tenant", "a"),
		want: want{next: at.Add(2 * time.Second), contentType: "application/json", data: `{"n":1}`},
	}, {
		name: "standard cron in a time zone",
		src: pingSource("tenant", "b", func(s *sourcesv1.PingSource) {
			s.Spec.Schedule, s.Spec.Timezone = "0 12 * * *", "Europe/Paris"
		}),
		want: want{next: time.Date(2026, 3, 1, 12, 0, 0, 0, paris), contentType: "application/json", data: `{"n":1}`},
	}, {
		name: "seconds field and base64 data",
		src: pingSource("tenant", "c", func(s *sourcesv1.PingSource) {
			s.Spec.Schedule, s.Spec.Data, s.Spec.DataBase64, s.Spec.ContentType = "*/10 * * * * *", "", "AAEC/w==", "application/octet-stream"
		}),
		want: want{next: at.Add(10 * time.Second), contentType: "application/octet-stream", data: "\x00\x01\x02\xff"},
	}, {
		name: "no data: no content type either",
		src: pingSource("tenant", "d", func(s *sourcesv1.PingSource) {
			s.Spec.Schedule, s.Spec.Data = "@hourly", ""
		}),
		want: want{next: time.Date(2026, 3, 1, 11, 0, 0, 0, time.Local)},
	}, {
		name: "overrides, CA, audience and OIDC account",
		src: pingSource("tenant", "e", func(s *sourcesv1.PingSource) {
			s.Spec.CloudEventOverrides = &duckv1.CloudEventOverrides{Extensions: map[string]string{"team": "blue", "tier": "1"}}
			s.Status.SinkCACerts, s.Status.SinkAudience = ptr("PEM"), ptr("sink-aud")
			s.Status.Auth = &duckv1.AuthStatus{ServiceAccountName: ptr("oidc-e")}
		}),
		want: want{next: at.Add(2 * time.Second), contentType: "application/json", data: `{"n":1}`,
			ext: map[string]any{"team": "blue", "tier": "1"}, ca: "PEM", aud: "sink-aud", sa: "oidc-e"},
	}, {
		name:    "not ready",
		src:     pingSource("tenant", "f", func(s *sourcesv1.PingSource) { s.Status.MarkNoSink("NotFound", "") }),
		wantErr: errNotServed,
	}, {
		name: "Deployed Unknown, as during an adapter scale-up: served",
		src:  pingSource("tenant", "l", conditions(corev1.ConditionTrue, corev1.ConditionUnknown, corev1.ConditionTrue)),
		want: want{next: at.Add(2 * time.Second), contentType: "application/json", data: `{"n":1}`},
	}, {
		name: "Deployed False, from a release without the OIDC condition: served",
		src: pingSource("tenant", "m", func(s *sourcesv1.PingSource) {
			s.Status.SetConditions(apis.Conditions{
				{Type: apis.ConditionReady, Status: corev1.ConditionFalse},
				{Type: sourcesv1.PingSourceConditionSinkProvided, Status: corev1.ConditionTrue},
				{Type: sourcesv1.PingSourceConditionDeployed, Status: corev1.ConditionFalse},
			})
		}),
		want: want{next: at.Add(2 * time.Second), contentType: "application/json", data: `{"n":1}`},
	}, {
		name:    "Deployed Unknown and the sink not resolved",
		src:     pingSource("tenant", "n", conditions(corev1.ConditionFalse, corev1.ConditionUnknown, corev1.ConditionTrue)),
		wantErr: errNotServed,
	}, {
		name:    "Deployed Unknown and no OIDC identity",
		src:     pingSource("tenant", "o", conditions(corev1.ConditionTrue, corev1.ConditionUnknown, corev1.ConditionFalse)),
		wantErr: errNotServed,
	}, {
		name: "no SinkProvided condition at all",
		src: pingSource("tenant", "p", func(s *sourcesv1.PingSource) {
			s.Status.SetConditions(apis.Conditions{{Type: apis.ConditionReady, Status: corev1.ConditionUnknown}})
		}),
		wantErr: errNotServed,
	}, {
		name:    "no sink",
		src:     pingSource("tenant", "g", func(s *sourcesv1.PingSource) { s.Status.SinkURI = nil }),
		wantErr: errNotServed,
	}, {
		name:   "bad schedule",
		src:    pingSource("tenant", "h", func(s *sourcesv1.PingSource) { s.Spec.Schedule = "every minute" }),
		errAny: true,
	}, {
		name:   "bad time zone",
		src:    pingSource("tenant", "i", func(s *sourcesv1.PingSource) { s.Spec.Timezone = "Mars/Olympus" }),
		errAny: true,
	}, {
		name:   "bad base64",
		src:    pingSource("tenant", "j", func(s *sourcesv1.PingSource) { s.Spec.DataBase64 = "!!" }),
		errAny: true,
	}, {
		name: "bad extension name",
		src: pingSource("tenant", "k", func(s *sourcesv1.PingSource) {
			s.Spec.CloudEventOverrides = &duckv1.CloudEventOverrides{Extensions: map[string]string{"Bad-Name": "x"}}
		}),
		errAny: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := newJob(tc.src)
			switch {
			case tc.wantErr != nil || tc.errAny:
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := j.schedule.Next(at); !got.Equal(tc.want.next) {
				t.Errorf("next tick = %v, want %v", got, tc.want.next)
			}
			e := j.event
			if e.Type() != "dev.knative.sources.ping" || e.Source() != "/apis/v1/namespaces/tenant/pingsources/"+tc.src.Name {
				t.Errorf("type, source = %q, %q", e.Type(), e.Source())
			}
			if e.DataContentType() != tc.want.contentType || string(e.Data()) != tc.want.data {
				t.Errorf("content type, data = %q, %q; want %q, %q", e.DataContentType(), e.Data(), tc.want.contentType, tc.want.data)
			}
			if diff := cmp.Diff(tc.want.ext, e.Extensions()); diff != "" && len(tc.want.ext)+len(e.Extensions()) > 0 {
				t.Errorf("extensions (-want +got):\n%s", diff)
			}
			tg := j.target
			if tg.URL.String() != "http://sink.tenant/" || tg.Namespace != "tenant" || tg.CACerts != tc.want.ca ||
				tg.Audience != tc.want.aud || tg.ServiceAccount != tc.want.sa {
				t.Errorf("target = %+v", tg)
			}
		})
	}
}

func TestJobSpecChanges(t *testing.T) {
	base := pingSource("tenant", "a")
	tests := []struct {
		name   string
		change func(*sourcesv1.PingSource)
		same   bool
	}{
		{name: "status heartbeat and labels", same: true, change: func(s *sourcesv1.PingSource) {
			s.Labels = map[string]string{"x": "y"}
			s.Status.ObservedGeneration = 7
		}},
		{name: "schedule", change: func(s *sourcesv1.PingSource) { s.Spec.Schedule = "@every 3s" }},
		{name: "time zone", change: func(s *sourcesv1.PingSource) { s.Spec.Timezone = "UTC" }},
		{name: "data", change: func(s *sourcesv1.PingSource) { s.Spec.Data = `{"n":2}` }},
		{name: "sink", change: func(s *sourcesv1.PingSource) { s.Status.SinkURI, _ = apis.ParseURL("http://other/") }},
		{name: "audience", change: func(s *sourcesv1.PingSource) { s.Status.SinkAudience = ptr("aud") }},
		{name: "overrides", change: func(s *sourcesv1.PingSource) {
			s.Spec.CloudEventOverrides = &duckv1.CloudEventOverrides{Extensions: map[string]string{"a": "b"}}
		}},
	}
	j1, err := newJob(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base.DeepCopy()
			tc.change(s)
			j2, err := newJob(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := j1.spec == j2.spec; got != tc.same {
				t.Errorf("same spec = %v, want %v", got, tc.same)
			}
		})
	}
}
