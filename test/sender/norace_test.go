//go:build !race

package sender

// raceEnabled: this test binary runs without the race detector, and so
// does the proxy it builds (benchmarks measure the real thing).
const raceEnabled = false
