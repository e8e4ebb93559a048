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
