package config

import "testing"

func TestDefaultMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		fileLimit uint64
		want      int
	}{
		{0, 10000},
		{1, 100},
		{200, 100},
		{202, 101},
		{20000, 10000},
		{200000, 100000},
		{200002, 100000},
		{1 << 62, 100000},
	} {
		if got := DefaultMaxConnections(tc.fileLimit); got != tc.want {
			t.Errorf("DefaultMaxConnections(%d) = %d, want %d", tc.fileLimit, got, tc.want)
		}
	}
}
