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
