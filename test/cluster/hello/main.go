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
