//go:build race

package sender

// raceEnabled: this test binary runs with the race detector, and so does
// the proxy it builds.
const raceEnabled = true
