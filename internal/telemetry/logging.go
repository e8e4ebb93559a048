package telemetry

import (
	"go.uber.org/zap"
	"knative.dev/pkg/logging"
)

// unsampled is knative.dev/pkg's production logging configuration without
// its sampler, which keeps the first 100 lines of a message a second and
// then 1 in 100: a line that reports a lost event must never be sampled
// away. Callers bound their own per-request lines instead.
const unsampled = `{"sampling": null}`

// NewLogger returns the process's logger at level (debug, info, warn or
// error; if empty, info), in knative.dev/pkg's JSON format, never sampled.
func NewLogger(level string) *zap.SugaredLogger {
	logger, _ := logging.NewLogger(unsampled, level)
	return logger
}
