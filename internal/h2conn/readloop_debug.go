//go:build h2debug

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

package h2conn

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
)

// ReadLoop marks the state of a connection that its read loop alone may
// touch: under h2debug, Check panics on any other goroutine, as x/net's
// server checks its serve goroutine under its own debug flag.
type ReadLoop struct{ id atomic.Uint64 }

// Enter makes the calling goroutine the read loop.
func (r *ReadLoop) Enter() { r.id.Store(goroutineID()) }

// Check panics unless the read loop calls it.
func (r *ReadLoop) Check() {
	if id, owner := goroutineID(), r.id.Load(); id != owner {
		panic(fmt.Sprintf("h2conn: read-loop state touched on goroutine %d, the read loop is %d", id, owner))
	}
}

// goroutineID is the calling goroutine's number, read from its stack's
// first line ("goroutine 42 [running]:").
func goroutineID() uint64 {
	var buf [32]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	var id uint64
	for _, b := range line {
		if b < '0' || b > '9' {
			break
		}
		id = id*10 + uint64(b-'0')
	}
	if id == 0 {
		panic("h2conn: no goroutine number in " + string(buf[:]))
	}
	return id
}
