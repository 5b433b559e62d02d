//go:build !linux

package testenv

import "syscall"

// dieWithParent has no equivalent outside Linux; there [Main] alone stops
// the started servers.
func dieWithParent() *syscall.SysProcAttr {
	return nil
}
