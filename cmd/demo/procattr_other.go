//go:build !linux

package main

import "syscall"

// dieWithParent: only Linux has a parent-death signal. Elsewhere a member
// outlives a demo killed by SIGKILL (the demo stops its members when it
// ends otherwise).
func dieWithParent() *syscall.SysProcAttr { return nil }
