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

// Command sink is a destination for local use: it logs every request it
// receives (method, path, CloudEvents attributes, body) as one JSON line
// and answers 200, or the status given by -status.
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	status := flag.Int("status", http.StatusOK, "status to answer with")
	delay := flag.Duration("delay", 0, "how long to hold each call before answering")
	flag.Parse()

	enc := json.NewEncoder(os.Stdout)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		ce := map[string]string{}
		for k, v := range r.Header {
			if strings.HasPrefix(k, "Ce-") {
				ce[strings.ToLower(strings.TrimPrefix(k, "Ce-"))] = v[0]
			}
		}
		_ = enc.Encode(map[string]any{
			"time": time.Now().Format(time.RFC3339Nano), "method": r.Method, "path": r.URL.RequestURI(),
			"proto": r.Proto, "cloudevent": ce, "contentType": r.Header.Get("Content-Type"), "body": string(body),
		})
		select {
		case <-time.After(*delay):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(*status)
	})
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	log.Printf("sink listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}
