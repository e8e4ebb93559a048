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

// Command probe runs inside the cluster's pods for the smoke checks:
//
//	probe              wait for SIGTERM (a pod to exec into)
//	probe lookup NAME  resolve NAME with the pod's resolv.conf; print the
//	                   addresses or the error, and how long it took
//	probe get URL      GET URL (5 s timeout) and print the status and body
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		return
	}
	if len(os.Args) != 3 {
		fail("usage: probe [lookup NAME | get URL]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	switch os.Args[1] {
	case "lookup":
		addrs, err := net.DefaultResolver.LookupHost(ctx, os.Args[2])
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			fail(fmt.Sprintf("lookup %s: %v (after %v)", os.Args[2], err, took))
		}
		fmt.Printf("%s %v (after %v)\n", os.Args[2], addrs, took)
	case "get":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, os.Args[2], nil)
		if err != nil {
			fail(err.Error())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fail(err.Error())
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Printf("%d %s", resp.StatusCode, body)
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}
