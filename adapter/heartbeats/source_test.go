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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSourceFrom(t *testing.T) {
	cases := []struct {
		name, sink, period string
		want               time.Duration
		err                string
	}{
		{name: "http", sink: "http://sink.ns.svc/x", period: "10s", want: 10 * time.Second},
		{name: "https", sink: "https://sink.ns.svc", period: "1s", want: time.Second},
		{name: "longest period", sink: "http://s", period: "24h", want: 24 * time.Hour},
		{name: "period below the floor", sink: "http://s", period: "999ms", err: "period"},
		{name: "period above the ceiling", sink: "http://s", period: "24h1s", err: "period"},
		{name: "no period", sink: "http://s", err: "period"},
		{name: "relative sink", sink: "/x", period: "1s", err: "sink"},
		{name: "other scheme", sink: "ftp://s", period: "1s", err: "sink"},
		{name: "no sink", period: "1s", err: "sink"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hb"},
				Data: map[string]string{"sink": c.sink, "period": c.period}}
			src, err := SourceFrom(cm)
			if src.Key() != "ns/hb" {
				t.Errorf("key %q, want ns/hb even on error", src.Key())
			}
			if c.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.err) {
					t.Fatalf("error %v, want one about the %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.Period != c.want || src.Sink.String() != c.sink {
				t.Errorf("got %s every %s, want %s every %s", src.Sink, src.Period, c.sink, c.want)
			}
			if src.EventSource() != "/apis/v1/namespaces/ns/configmaps/hb" {
				t.Errorf("event source %q", src.EventSource())
			}
		})
	}
}
