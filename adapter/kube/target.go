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

package kube

import (
	duckv1 "knative.dev/pkg/apis/duck/v1"

	"knative.dev/event-forwarding-proxy/adapter"
)

// TargetFor reads the Target of a Knative source in namespace from its
// status, as its controller resolved it: status.sinkUri, sinkCACerts,
// sinkAudience and auth.serviceAccountName. The sink URL is nil when the
// status has none yet (Send then refuses the event).
func TargetFor(namespace string, st *duckv1.SourceStatus) adapter.Target {
	t := adapter.Target{Namespace: namespace}
	if st.SinkURI != nil {
		t.URL = st.SinkURI.URL()
	}
	if st.SinkCACerts != nil {
		t.CACerts = *st.SinkCACerts
	}
	if st.SinkAudience != nil {
		t.Audience = *st.SinkAudience
	}
	if st.Auth != nil && st.Auth.ServiceAccountName != nil {
		t.ServiceAccount = *st.Auth.ServiceAccountName
	}
	return t
}
