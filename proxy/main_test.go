package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a held
// call, a background delivery or a connection nobody closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
