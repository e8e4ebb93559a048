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

// Package delivery is the outbound side shared by the proxy and by event
// sources: the transports that reach destinations, the classification of
// their failures, retry policy, and the wire names both sides agree on.
package delivery

// Header names of the forwarding contract (see docs/configuration.md).
// They are a contract with callers outside this repository: never rename.
const (
	// HeaderForwardTo names the absolute http(s) URL of the destination.
	HeaderForwardTo = "Kn-Forward-To"
	// HeaderForwardTimeout is an optional ISO-8601 duration (PT10M) capping
	// the call to the destination.
	HeaderForwardTimeout = "Kn-Forward-Timeout"
	// HeaderForwardRetry is the number of retries of an asynchronous call.
	HeaderForwardRetry = "Kn-Forward-Retry"
	// HeaderForwardBackoffDelay is the base delay (ISO-8601) between the
	// retries of an asynchronous call.
	HeaderForwardBackoffDelay = "Kn-Forward-Backoff-Delay"
	// HeaderForwardBackoffPolicy is linear or exponential (the default):
	// how the delay between an asynchronous call's retries grows, as a
	// Knative delivery spec's backoffPolicy says.
	HeaderForwardBackoffPolicy = "Kn-Forward-Backoff-Policy"
	// HeaderForwardRetryAfterMax is an ISO-8601 duration capping how long a
	// destination's Retry-After delays an asynchronous call's retry, as a
	// Knative delivery spec's retryAfterMax does; PT0S ignores Retry-After.
	HeaderForwardRetryAfterMax = "Kn-Forward-Retry-After-Max"
	// HeaderForwardDeadLetterTo names the absolute http(s) URL an
	// asynchronous call's event goes to after its last failed attempt, with
	// Knative's error extensions (knativeerrordest, knativeerrorcode,
	// knativeerrordata), as a Knative delivery spec's deadLetterSink.
	HeaderForwardDeadLetterTo = "Kn-Forward-Dead-Letter-To"
	// HeaderForwardAuthorization carries the caller's token for the proxy.
	HeaderForwardAuthorization = "Kn-Forward-Authorization"
	// HeaderForwardError is set on every answer the proxy makes itself.
	HeaderForwardError = "Kn-Forward-Error"
	// HeaderForwardPrefix starts every header of the contract; the proxy
	// strips all of them before forwarding.
	HeaderForwardPrefix = "Kn-Forward-"

	// HeaderPrefer carries "respond-async" (RFC 7240) for the async mode.
	HeaderPrefer = "Prefer"
	// PreferRespondAsync is the Prefer token asking for a 202 hand-off.
	PreferRespondAsync = "respond-async"
	// HeaderNamespace is set by Knative sources to their namespace.
	HeaderNamespace = "Kn-Namespace"
	// HeaderRetryAfter is the standard Retry-After header.
	HeaderRetryAfter = "Retry-After"
)
