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
