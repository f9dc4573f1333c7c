package pgtest

import "syscall"

// serverProcAttr runs the server as cred in a process group of its own.
// The server dies with this process (immediate shutdown on SIGQUIT) even
// when the test binary is killed before it can call Stop.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
}
