//go:build !linux

package cluster_test

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere the
// test's cleanup stops etcd.
func dieWithParent() *syscall.SysProcAttr { return nil }
