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
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestNewLoggerFromZapConfig: the zap configuration upstream's controller
// passes sets the format and level, a level given overrides it, and no
// line is ever sampled away, although knative's production configuration
// samples when the zap configuration does not say.
func TestNewLoggerFromZapConfig(t *testing.T) {
	tests := []struct {
		name, level, zapLevel string
		wantDebug             bool
	}{
		{name: "the configuration's level", zapLevel: "debug", wantDebug: true},
		{name: "the override wins", zapLevel: "debug", level: "info"},
		{name: "the override lowers", zapLevel: "warn", level: "debug", wantDebug: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "log")
			zapConfig, _ := json.Marshal(map[string]any{
				"level": tc.zapLevel, "encoding": "json", "outputPaths": []string{out}, "errorOutputPaths": []string{"stderr"},
				"encoderConfig": map[string]string{"messageKey": "message", "levelKey": "severity"},
			})
			logger, err := NewLoggerFromZapConfig(string(zapConfig), tc.level)
			if err != nil {
				t.Fatal(err)
			}
			logger.Debug("a debug line")
			for i := range 300 {
				logger.Warnw("the same line", "n", i)
			}
			_ = logger.Sync()
			lines := readLines(t, out)
			debug, warn := 0, 0
			for _, l := range lines {
				switch {
				case l["message"] == "a debug line" && l["severity"] == "DEBUG": // knative's encoder
					debug++
				case l["message"] == "the same line" && l["severity"] == "WARNING":
					warn++
				}
			}
			if (debug == 1) != tc.wantDebug {
				t.Errorf("%d debug lines, want debug %v", debug, tc.wantDebug)
			}
			if warn != 300 {
				t.Errorf("%d of 300 identical lines written: sampled", warn)
			}
		})
	}
}

func TestNewLoggerFromZapConfigRefusesWhatIsNotAnObject(t *testing.T) {
	for _, bad := range []string{"level=debug", `["debug"]`, `"debug"`} {
		if _, err := NewLoggerFromZapConfig(bad, ""); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if l, err := NewLoggerFromZapConfig("", ""); err != nil || l.Level().String() != "info" {
		t.Errorf("no configuration: %v at %v, want knative's default at info", err, l.Level())
	}
}

func readLines(t *testing.T, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %s: %v", strconv.Quote(sc.Text()), err)
		}
		out = append(out, m)
	}
	return out
}
