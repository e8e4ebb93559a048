package load

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// RaiseNofile raises this process's open-file limit as far as it is
// allowed: the hard limit too when privileged, else the soft limit to the
// hard one. Children started afterwards inherit it. It returns the limit
// in force.
func RaiseNofile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if lim.Max < want.Max && syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		return want.Cur, nil
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

func describeMachine(nofile uint64, peerCPU int) result.Machine {
	m := result.Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), NofileLimit: nofile, PeerCPU: peerCPU}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range bytes.Lines(b) {
			if k, v, ok := strings.Cut(string(line), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvgStart = loadAvg()
	return m
}

// loadAvg is the 1-minute load average, 0 when unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
