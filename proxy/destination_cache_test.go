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
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
)

// TestDestinationCacheSharesOneParse: calls naming the same destination
// share one parsed value, equal to what a parse of their own gives.
func TestDestinationCacheSharesOneParse(t *testing.T) {
	var dc destinationCache
	raw := "HTTP://Sink.NS.svc.cluster.local./path?q=1"
	first, err := dc.parse([]string{raw})
	if err != nil {
		t.Fatal(err)
	}
	again, err := dc.parse([]string{raw})
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Error("the second call to the same destination parsed it again")
	}
	fresh, err := newDestination([]string{raw})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, fresh) {
		t.Errorf("cached %+v (%v), parsed %+v (%v)", first, first.url, fresh, fresh.url)
	}
	if first.key != "sink.ns.svc.cluster.local:80" || first.namespace != "ns" {
		t.Errorf("key %q, namespace %q", first.key, first.namespace)
	}
}

// TestDestinationCacheKeepsNoError: bad values get their error every time
// and take no room; repeated values are refused as repeated, not looked up.
func TestDestinationCacheKeepsNoError(t *testing.T) {
	var dc destinationCache
	for _, values := range [][]string{{"ftp://sink/"}, {""}, nil, {"http://a/", "http://a/"}} {
		for range 2 {
			if _, err := dc.parse(values); !errors.Is(err, errBadDestination) && !errors.Is(err, errMissingDestination) {
				t.Errorf("parse(%q) = %v, want a bad or missing destination", values, err)
			}
		}
	}
	if n := dc.len(); n != 0 {
		t.Errorf("%d entries after bad values only", n)
	}
}

// TestDestinationCacheIsBounded fills the cache to its bound and one past
// it: it never holds more than destinationCacheSize entries, and a value
// parsed after it started over is still right.
func TestDestinationCacheIsBounded(t *testing.T) {
	var dc destinationCache
	name := func(i int) string { return "http://sink-" + strconv.Itoa(i) + ".ns.svc/" }
	for i := range destinationCacheSize {
		if _, err := dc.parse([]string{name(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dc.len(); n != destinationCacheSize {
		t.Fatalf("%d entries after %d destinations, want all of them", n, destinationCacheSize)
	}
	d, err := dc.parse([]string{name(destinationCacheSize)})
	if err != nil {
		t.Fatal(err)
	}
	if n := dc.len(); n != 1 {
		t.Errorf("%d entries after one past the bound, want 1 (it starts over)", n)
	}
	if d.url.Host != "sink-4096.ns.svc" || d.key != "sink-4096.ns.svc:80" {
		t.Errorf("after starting over: host %q, key %q", d.url.Host, d.key)
	}
}

// TestDestinationCacheConcurrent parses the same and different values from
// many goroutines (run with -race).
func TestDestinationCacheConcurrent(t *testing.T) {
	var dc destinationCache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				raw := "http://sink-" + strconv.Itoa((g*i)%50) + ".ns.svc/"
				d, err := dc.parse([]string{raw})
				if err != nil || d.url.String() != raw {
					t.Errorf("parse(%q) = %v, %v", raw, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// len is how many destinations dc holds.
func (dc *destinationCache) len() int {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return len(dc.m)
}
