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

package kube

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"knative.dev/event-forwarding-proxy/adapter"
)

// ServiceAccountToken is where Kubernetes mounts a pod's token.
const ServiceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // a file path, not a credential

// TokenServiceAccount returns the service account whose token (a JWT with
// subject system:serviceaccount:<namespace>:<name>) is in file: in a pod,
// ServiceAccountToken names the pod's own, the identity an adapter
// presents to the proxy. The signature is not checked: the file is the
// pod's own.
func TokenServiceAccount(file string) (adapter.ServiceAccount, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return adapter.ServiceAccount{}, err
	}
	parts := strings.Split(strings.TrimSpace(string(b)), ".")
	if len(parts) != 3 {
		return adapter.ServiceAccount{}, fmt.Errorf("%s: not a JWT", file)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return adapter.ServiceAccount{}, fmt.Errorf("%s: %w", file, err)
	}
	var claims struct {
		Subject string `json:"sub"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return adapter.ServiceAccount{}, fmt.Errorf("%s: %w", file, err)
	}
	f := strings.Split(claims.Subject, ":")
	if len(f) != 4 || f[0] != "system" || f[1] != "serviceaccount" {
		return adapter.ServiceAccount{}, fmt.Errorf("%s: subject %q is not a service account", file, claims.Subject)
	}
	return adapter.ServiceAccount{Namespace: f[2], Name: f[3]}, nil
}
