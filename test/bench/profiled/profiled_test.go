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

package profiled

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// answersOK reports whether url answers 200.
func answersOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestServe(t *testing.T) {
	tests := []struct {
		name     string
		h2Server string
	}{
		{name: "net/http h2c", h2Server: ""},
		{name: "x/net h2c with the random scheduler", h2Server: "xnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = w.Write([]byte("ok"))
			}))
			defer dest.Close()
			port, mport := testproc.FreePort(t), testproc.FreePort(t)
			t.Setenv("PORT", strconv.Itoa(port))
			t.Setenv("METRICS_PORT", strconv.Itoa(mport))
			t.Setenv("FORWARD_ALLOWED_CIDRS", "127.0.0.0/8")
			t.Setenv(EnvH2Server, tt.h2Server)
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- Serve(ctx) }()
			defer func() {
				cancel()
				if err := <-served; err != nil && !strings.Contains(err.Error(), "closed") {
					t.Errorf("Serve: %v", err)
				}
			}()
			metrics := "http://127.0.0.1:" + strconv.Itoa(mport)
			testproc.Eventually(t, 10*time.Second, "the metrics endpoint answers", func() bool { return answersOK(metrics + "/metrics") })

			client := testproc.H2CClient(t, 10*time.Second)
			defer client.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/", strings.NewReader("{}"))
			req.Header.Set("Kn-Forward-To", dest.URL+"/")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("forwarding through the in-process proxy: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "ok" || resp.ProtoMajor != 2 {
				t.Errorf("answer %s %d %q, want HTTP/2.0 200 ok", resp.Proto, resp.StatusCode, body)
			}

			file := filepath.Join(t.TempDir(), "cpu.pb.gz")
			for _, path := range []string{PathCPUStart + "?file=" + file, PathCPUStop, PathGC} {
				resp, err := http.Post(metrics+path, "", nil)
				if err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("POST %s: %v %v", path, err, resp)
				}
				_ = resp.Body.Close()
			}
			if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
				t.Errorf("CPU profile %s: %v", file, err)
			}
			if !answersOK(metrics + "/debug/pprof/heap") {
				t.Errorf("%s/debug/pprof/heap does not answer 200", metrics)
			}
		})
	}
}
