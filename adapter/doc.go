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

// Package adapter is what a multi-tenant source uses to send its events:
// the Sender, which delivers each event directly to its sink or hands it
// to the event-forwarding proxy; the Router, which picks the route from
// the forwarding configuration and the number of sources served; and the
// tokens the sends carry when OIDC is on. Package adapter/kube connects
// them to a cluster (the live ConfigMap watch, the TokenRequest API), and
// adapter/mtping is the PingSource adapter built on them.
//
// It never links the proxy's inbound side: a source does not carry the
// server.
package adapter
