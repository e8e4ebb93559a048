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

// Command hello is the cluster's smoke-test server: it answers every request
// on $PORT (default 8080) with "hello from <hostname>", and logs each
// request's method, path and CloudEvent id and source (eventing-smoke.sh
// reads them).
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Ce-Id"); id != "" {
			log.Printf("%s %s ce-id=%s ce-source=%s", r.Method, r.URL.Path, id, r.Header.Get("Ce-Source"))
		}
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	log.Fatal(http.ListenAndServe(":"+port, nil))
}
