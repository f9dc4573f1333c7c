//go:build linux

// A hardening step of the set-up that the system refuses after the
// namespaces exist (here keyctl, refused with EPERM as Docker's default
// seccomp profile does) must not make SandboxAuto run commands with no
// sandbox at all.
package workspace

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestKeyctlRefusedKeepsSandbox(t *testing.T) {
	// The seccomp filter cannot be removed once installed: the case runs
	// in a process of its own.
	if child, out, err := inChild(t, 0); !child {
		if err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}

	// 1. The sandbox works here.
	base := dirOutsideTmp(t)
	first := filepath.Join(base, "first")
	if err := os.Mkdir(first, 0o755); err != nil {
		t.Fatal(err)
	}
	w0, err := New(first, nil)
	if err != nil {
		t.Fatalf("New without the filter: %v", err)
	}
	if !w0.Protections().Sandbox {
		w0.Close()
		t.Fatalf("precondition: this machine has no sandbox at all (%s); the finding needs one that works", w0.Protections())
	}
	w0.Close()

	// 2. keyctl now fails with EPERM, as under Docker's default seccomp
	// profile. Nothing else changes.
	installKeyctlEPERM(t)
	if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != unix.EPERM {
		t.Fatalf("keyctl after the filter: errno %v, want EPERM", errno)
	}

	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(base, "outside.txt")
	w, err := New(ws, nil) // SandboxAuto, the default
	if err != nil {
		t.Fatalf("New with keyctl refused: %v (the keyring is one protection among many: it is listed as missing)", err)
	}
	defer w.Close()
	t.Logf("protections: %s", w.Protections())
	res, err := w.RunCommand(context.Background(), RunCommandInput{Command: "echo escaped > " + outside})
	if err != nil {
		t.Fatal(err)
	}
	if _, serr := os.Stat(outside); serr == nil {
		t.Errorf("a refused keyctl made SandboxAuto run the command unsandboxed (sandboxed=%v): it wrote %s outside the workspace; protections: %s",
			res.Sandboxed, outside, w.Protections())
	}
	if !w.Protections().Sandbox {
		t.Errorf("namespaces, mounts and Landlock work, yet Protections says: %s", w.Protections())
	}
	if !slices.ContainsFunc(w.Protections().Missing, func(m string) bool { return strings.Contains(m, "keyring") }) {
		t.Errorf("the refused keyring is not among the missing protections: %s", w.Protections())
	}
}

// installKeyctlEPERM installs, on every thread of this process, a seccomp
// filter that makes keyctl(2) fail with EPERM; children inherit it.
func installKeyctlEPERM(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatalf("no_new_privs: %v", err)
	}
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_KEYCTL},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		t.Fatalf("seccomp: %v", errno)
	}
}
