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

package delivery

import (
	"context"
	"errors"
)

// Failure says why a call to a destination ended without an answer.
type Failure int

const (
	// Unreachable: DNS, connect, TLS, or the connection broke before the
	// response headers arrived.
	Unreachable Failure = iota
	// TimedOut: the call's deadline passed before the answer came.
	TimedOut
	// CallerGone: the caller cancelled (disconnected); nobody is listening.
	CallerGone
)

func (f Failure) String() string {
	switch f {
	case TimedOut:
		return "timeout"
	case CallerGone:
		return "caller_gone"
	default:
		return "unreachable"
	}
}

// Classify maps the error of a round trip made under ctx to a Failure. The
// context decides first: a transport error caused by the deadline or by the
// caller leaving is reported as such, whatever its concrete type.
func Classify(ctx context.Context, err error) Failure {
	switch cerr := ctx.Err(); {
	case errors.Is(cerr, context.DeadlineExceeded), errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return TimedOut
	case cerr != nil:
		return CallerGone
	case dialFailed(err):
		// A connect or DNS timeout is the dialer's own, not the call's
		// deadline; Go reports it either way at random.
		return Unreachable
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut
	case errors.Is(err, context.Canceled):
		return CallerGone
	default:
		return Unreachable
	}
}
