//go:build unix && !linux

package pgtest

import "syscall"

// serverProcAttr runs the server as cred in a process group of its own.
// Without Linux's parent-death signal, a server whose test binary is
// killed before it can call Stop outlives it; Stop and the test's cleanup
// stop it otherwise.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
