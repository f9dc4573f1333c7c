//go:build linux

package workspace

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// childEnv marks the process inChild starts: this test binary run again
// for the one test that started it.
const childEnv = "POLYWEAVE_WORKSPACE_TEST_CHILD"

// inChild reports whether this process is the child of t's own run; if
// not, it runs t again in a child process of this test binary (in its own
// user namespace, with the host's user as root in it, when flags has
// CLONE_NEWUSER; with flags' other namespaces) and returns the child's
// combined output and error (an error too when the child did not run and
// pass the test). Cases that change the process for good (a
// seccomp filter, a lowered quota, a mount) run so.
func inChild(t *testing.T, flags uintptr) (child bool, out []byte, err error) {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true, nil, nil
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), noRaceExitSleep)
	if flags != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
		if flags&syscall.CLONE_NEWUSER != 0 {
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		}
	}
	out, err = cmd.CombinedOutput()
	if err == nil && !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")) {
		err = errors.New("the child process did not run the test")
	}
	return false, out, err
}
