//go:build linux

// Inside a container the host's /proc usually has parts masked
// (/proc/kcore, /proc/keys, /proc/sys over-mounted), and the kernel then
// refuses a new procfs in a user namespace. The sandbox cannot be set
// up there: SandboxAuto runs commands unsandboxed with a warning, as
// where the namespaces cannot be created, and SandboxRequired fails
// with ErrSandboxUnavailable.
package workspace

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestProcMaskedRunsUnsandboxedUnderAuto(t *testing.T) {
	// The mask goes on a mount namespace of a process of its own, in a
	// user namespace of its own so that nothing propagates back to the
	// host.
	if child, out, err := inChild(t, syscall.CLONE_NEWUSER|syscall.CLONE_NEWNS); !child {
		if err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}

	if err := unix.Mount("none", "/proc/sys", "tmpfs", 0, ""); err != nil {
		t.Fatalf("mask /proc/sys as a container runtime does: %v", err)
	}
	ws, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatalf("New with SandboxAuto where the system cannot mount a /proc for the sandbox: %v", err)
	}
	defer ws.Close()
	prot := ws.Protections()
	if prot.Sandbox || !strings.Contains(prot.String(), "/proc") {
		t.Errorf("Protections = %s, want no sandbox, naming the /proc it could not mount", prot)
	}
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo hi"})
	if err != nil || res.Stdout != "hi\n" || res.Sandboxed {
		t.Fatalf("echo hi: %+v, %v; want hi, unsandboxed", res, err)
	}

	_, err = New(t.TempDir(), &Options{Sandbox: SandboxRequired})
	if !errors.Is(err, ErrSandboxUnavailable) || !strings.Contains(err.Error(), "SandboxOff") {
		t.Fatalf("New with SandboxRequired: %v, want ErrSandboxUnavailable naming SandboxOff", err)
	}
}
