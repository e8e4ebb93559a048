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

package config

import "syscall"

// OpenFileLimit is the process's soft limit on open files
// (RLIMIT_NOFILE), or 0 when it cannot be read or is unlimited
// (RLIM_INFINITY, all bits set).
func OpenFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur == ^uint64(0) {
		return 0
	}
	return l.Cur
}

// DefaultMaxConnections sizes the inbound connection limit from the
// open-file limit: half of it, the other half left for the connections to
// destinations, listeners and files; within [100, 100000]. Without a
// known limit (0) it is 10000.
func DefaultMaxConnections(fileLimit uint64) int {
	if fileLimit == 0 {
		return 10000
	}
	return int(min(max(fileLimit/2, 100), 100000))
}
