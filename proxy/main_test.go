package proxy

import (
	"testing"

	"go.uber.org/goleak"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestMain fails the package if a test leaves a goroutine behind: a held
// call, a background delivery or a connection nobody closed. Toxiproxy's
// own goroutines, which it leaks, are left out.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, proxytest.IgnoreToxiproxy()...)
}
