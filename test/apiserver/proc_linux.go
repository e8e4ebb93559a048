package apiserver

import "syscall"

// sysProcAttr makes the kernel kill a child if the test process dies
// without running its cleanup (a timeout panic, SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
