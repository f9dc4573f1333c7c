//go:build linux

package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// benchCloneTrue execs /bin/true in new namespaces of the given kinds.
func benchCloneTrue(flags uintptr) func(b *testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
			if flags&syscall.CLONE_NEWUSER != 0 {
				cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
				cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
			}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// namespacePairs are the rows of what each namespace adds to starting a
// process.
func namespacePairs() []pair {
	var pairs []pair
	plain := benchSide("exec true", benchCloneTrue(0))
	for _, ns := range []struct {
		name string
		flag uintptr
	}{
		{"user", syscall.CLONE_NEWUSER}, {"pid", syscall.CLONE_NEWPID}, {"mount", syscall.CLONE_NEWNS},
		{"network", syscall.CLONE_NEWNET}, {"ipc", syscall.CLONE_NEWIPC}, {"uts", syscall.CLONE_NEWUTS},
	} {
		pairs = append(pairs, pair{figure: "6", name: "exec true in a new " + ns.name + " namespace",
			ours: benchSide("clone+exec", benchCloneTrue(ns.flag)), base: plain,
			kind: duration, unit: "op", goal: info,
			note: "what one namespace adds to starting a process"})
	}
	return pairs
}
