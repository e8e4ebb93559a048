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

package proxy

import (
	"net/url"
	"sync"
)

// destination is a valid Kn-Forward-To value, parsed, with what follows
// from it alone.
type destination struct {
	url       *url.URL // shared by every call to it: never modified
	key       string   // the per-destination admission key (destinationKey)
	namespace string   // clusterNamespace of its host
}

func newDestination(values []string) (*destination, error) {
	u, err := parseDestination(values)
	if err != nil {
		return nil, err
	}
	return &destination{url: u, key: destinationKey(u), namespace: clusterNamespace(u.Hostname())}, nil
}

// destinationCacheSize bounds destinationCache: about 300 bytes an entry,
// so at most about 1.2 MB. More destinations than this in turn cost each
// call a parse again, never more memory.
const destinationCacheSize = 4096

// destinationCache keeps the valid Kn-Forward-To values seen last. A source
// sends to the same sink on every tick, so the calls to a destination share
// one parsed URL, admission key and namespace instead of each holding its
// own for as long as the destination holds it (about 350 bytes a call, and
// the parse's CPU). Only what the value alone decides is kept: the policy,
// the allowed hosts and the caller's namespace are judged on every call.
// When full, it starts over. The zero value is ready; a nil one parses
// every time.
type destinationCache struct {
	mu sync.Mutex
	m  map[string]*destination
}

// parse returns the destination that values, a request's Kn-Forward-To
// values, name, or why they are not one (parseDestination).
func (dc *destinationCache) parse(values []string) (*destination, error) {
	if dc == nil || len(values) != 1 {
		return newDestination(values)
	}
	raw := values[0]
	dc.mu.Lock()
	d := dc.m[raw]
	dc.mu.Unlock()
	if d != nil {
		return d, nil
	}
	d, err := newDestination(values)
	if err != nil {
		return nil, err
	}
	dc.mu.Lock()
	if dc.m == nil || len(dc.m) >= destinationCacheSize {
		dc.m = make(map[string]*destination)
	}
	dc.m[raw] = d
	dc.mu.Unlock()
	return d, nil
}
