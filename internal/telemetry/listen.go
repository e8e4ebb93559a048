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

package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Listen binds the address of every server before any of them serves, so
// that once one port answers (a probe, say) the others do too. On an error
// it closes what it bound.
func Listen(ctx context.Context, servers ...*http.Server) ([]net.Listener, error) {
	listeners := make([]net.Listener, 0, len(servers))
	for _, s := range servers {
		ln, err := new(net.ListenConfig).Listen(ctx, "tcp", s.Addr)
		if err != nil {
			for _, bound := range listeners {
				err = errors.Join(err, bound.Close())
			}
			return nil, fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
		listeners = append(listeners, ln)
	}
	return listeners, nil
}
