//go:build linux

package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// When the user's quota of namespaces is used up (which any process of
// the user can bring about), no command runs unsandboxed: a new
// workspace that needs the sandbox fails with ErrResources rather than
// falling back to none, and a sandboxed workspace's command whose
// sandbox cannot be set up fails to start. The test runs itself in a
// user namespace of its own, where it may lower the quota.
func TestNamespaceQuotaUsedUpRunsNothingUnsandboxed(t *testing.T) {
	child, out, err := inChild(t, syscall.CLONE_NEWUSER)
	if child {
		namespaceQuotaChild(t)
		return
	}
	if err != nil || !strings.Contains(string(out), "quota child done") {
		t.Fatalf("the test in a user namespace failed: %v\n%s", err, out)
	}
}

func namespaceQuotaChild(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	dirA, dirB := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a, err := New(dirA, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Protections().Sandbox {
		t.Fatalf("no sandbox before the quota is used up: %s", a.Protections())
	}
	// The quota is now what is in use: a's sandbox, prepared ahead.
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("1"), 0); err != nil {
		t.Fatalf("lower the user namespace quota: %v", err)
	}

	b, err := New(dirB, nil)
	if err == nil {
		defer b.Close()
		res, _ := b.RunCommand(context.Background(), RunCommandInput{Command: "touch " + outside})
		t.Errorf("New succeeded with the quota used up: %s; a command ran with sandboxed=%v", b.Protections(), res.Sandboxed)
	} else if errors.Is(err, sandbox.ErrUnsupported) || !errors.Is(err, sandbox.ErrResources) {
		t.Errorf("New with the quota used up: %v; want ErrResources, not ErrUnsupported", err)
	}

	// a's first command takes the sandbox prepared ahead; the next one
	// needs a new sandbox, which cannot be had. The model is told which
	// resource ran out, not that the machine is busy, and no host path
	// (the helper is started from /proc/self/exe).
	for i := range 2 {
		res, err := a.RunCommand(context.Background(), RunCommandInput{Command: fmt.Sprintf("echo %d >> %s", i, outside)})
		if i == 1 && (err != nil || res.Success || res.Reason != ReasonStartFailed || !strings.Contains(res.Error, "no space left")) {
			t.Errorf("a command whose sandbox cannot be set up: %+v, %v; want it not started", res, err)
		}
		if i == 1 && (!strings.Contains(res.Error, "quota of namespaces") || strings.Contains(res.Error, "busy") ||
			strings.Contains(res.Error, "/")) {
			t.Errorf("a command whose sandbox cannot be set up: %q; want it to say the quota of namespaces is used up, "+
				"and no path", res.Error)
		}
	}
	if b, err := os.ReadFile(outside); err == nil {
		t.Errorf("a command wrote outside its workspace: %q", b)
	}
	t.Log("quota child done")
}
