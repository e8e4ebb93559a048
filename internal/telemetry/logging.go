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

package telemetry

import (
	"encoding/json"
	"fmt"

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

// NewLoggerFromZapConfig returns the process's logger from a zap
// configuration in knative.dev/pkg's JSON form (config-logging's
// zap-logger-config, as upstream's controllers pass it in
// K_LOGGING_CONFIG), never sampled whatever it says; a non-empty level
// overrides its own. An empty zapConfig is NewLogger's format.
func NewLoggerFromZapConfig(zapConfig, level string) (*zap.SugaredLogger, error) {
	if zapConfig == "" {
		return NewLogger(level), nil
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(zapConfig), &cfg); err != nil {
		return nil, fmt.Errorf("the zap logger configuration is not a JSON object: %w", err)
	}
	cfg["sampling"] = nil
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	logger, _ := logging.NewLogger(string(b), level)
	return logger, nil
}
