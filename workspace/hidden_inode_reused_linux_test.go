//go:build linux

package workspace

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A file at a path hidden from commands that has the device and inode
// number of the one found there as the workspace was opened, but was
// born at another time, is another file, which took the number of one
// gone (ext4 gives a freed number to the next file made): the sandboxes
// refuse to run a command, as after a move. The test gives the identity
// the workspace expects another birth, as the file the number was
// first given to would have had.
func TestHiddenPathInodeNumberTakenByAnotherFileRefused(t *testing.T) {
	requireSandbox(t)
	dir := dirWithHiddenEnv(t)
	var stx unix.Statx_t
	mustDo(t, unix.Statx(unix.AT_FDCWD, dir+"/cfg/.env", unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx))
	if stx.Mask&unix.STATX_BTIME == 0 {
		t.Skipf("the file system of %s does not give files their birth time", dir)
	}
	ws, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer ws.Close()
	ws.hideMu.Lock()
	ids := ws.hiddenIDsLocked()
	found := false
	for i := range ids {
		if strings.HasSuffix(ids[i].Path, "/cfg/.env") && ids[i].Birth != 0 {
			ids[i].Birth--
			found = true
		}
	}
	ws.hideMu.Unlock()
	if !found {
		t.Fatalf("the workspace does not know when cfg/.env was born: %+v", ids)
	}
	// The sandbox New prepared was set up with the identity as it was.
	ws.warmMu.Lock()
	ws.releaseWarm()
	ws.warmMu.Unlock()
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
	mustDo(t, err)
	if res.Success || res.Sandboxed || !strings.Contains(res.Error, "moved or replaced") {
		t.Errorf("a command once cfg/.env holds a file that took the inode number of the one expected: %+v; want it refused", res)
	}
}
