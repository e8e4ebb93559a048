package load

import (
	"runtime"
	"syscall"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
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
	return result.Machine{
		Cores: runtime.NumCPU(), GoVersion: runtime.Version(), NofileLimit: nofile, PeerCPU: peerCPU,
		CPUModel: procstat.CPUModel(), Kernel: procstat.Kernel(), LoadAvgStart: procstat.LoadAvg(),
	}
}
