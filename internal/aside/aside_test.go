package aside

import (
	"errors"
	"runtime"
	"testing"
)

// TestDoRunsOnAnotherGoroutine: Do returns f's value and error, and f does
// not run on the caller's goroutine.
func TestDoRunsOnAnotherGoroutine(t *testing.T) {
	caller := goroutineID()
	id, err := Do(func() (string, error) { return goroutineID(), errors.New("boom") })
	if err == nil || err.Error() != "boom" {
		t.Errorf("error %v, want f's", err)
	}
	if id == caller {
		t.Errorf("f ran on the caller's goroutine (%s)", id)
	}
}

// goroutineID is the "goroutine N" header of the current stack.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	for i, b := range buf {
		if b == '[' {
			return string(buf[:i])
		}
	}
	return string(buf)
}
