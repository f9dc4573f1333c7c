package cluster_test

import "syscall"

// dieWithParent makes a child process (etcd) get SIGKILL when the test
// binary dies, even by SIGKILL.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
