package main

import "syscall"

// dieWithParent makes a child process (a cluster member) get SIGKILL
// when the demo dies, even by SIGKILL.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
