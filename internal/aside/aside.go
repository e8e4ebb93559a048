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

// Package aside runs a deep step of a call on a short-lived goroutine of
// its own. A goroutine that then waits for a destination keeps, for as
// long as it waits, a stack as large as the deepest point it ever reached:
// work that goes deeper than the wait, such as dialing or the CloudEvents
// SDK's encoding, is done aside so that it does not double that stack.
package aside

// Do runs f on a goroutine of its own and returns what it returned.
func Do[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}
