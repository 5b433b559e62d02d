package testenv

import "syscall"

// dieWithParent makes the kernel kill a started server when the test
// process dies, so a crashed or interrupted test run leaves none behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
