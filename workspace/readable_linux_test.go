//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sandboxed command reads the system's directories and the workspace,
// and no file elsewhere that is not hidden, even one the host's user
// may read: one of the user's own and, when the host runs as root, a
// root-only key in a directory only root may enter, as a service's
// beneath /var/lib (the user namespace maps the command to the host's
// root, which owns it; Landlock is what keeps it out). Both are in a
// directory of the test's own outside /tmp.
func TestSandbox_OnlySystemDirsReadable(t *testing.T) {
	requireFullSandbox(t)
	base := dirOutsideTmp(t)
	secrets := []string{filepath.Join(base, "own.key")}
	if os.Geteuid() == 0 {
		dir := filepath.Join(base, "service")
		mustDo(t, os.Mkdir(dir, 0o700))
		secrets = append(secrets, filepath.Join(dir, "private.key"))
	}
	for _, s := range secrets {
		mustDo(t, os.WriteFile(s, []byte("TOP-SECRET-KEY\n"), 0o600))
	}
	ws, err := New(t.TempDir(), nil)
	mustDo(t, err)
	defer ws.Close()
	writeFile(t, filepath.Join(ws.Dir(), "mine.txt"), "MINE")
	res := runIn(t, ws, "cat "+strings.Join(secrets, " ")+"; cat mine.txt; echo; "+
		"head -c 5 /etc/passwd; echo; ls /usr/bin | grep -c . >/dev/null && echo usr; echo tmp > /tmp/t && cat /tmp/t")
	if strings.Contains(res.Stdout, "TOP-SECRET-KEY") {
		t.Errorf("a sandboxed command read a file outside the workspace and the system's directories: %+v", res)
	}
	for _, want := range []string{"MINE\n", "root:", "usr\n", "tmp\n"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("%q missing: the workspace, /etc, /usr or /tmp is not readable: %+v", want, res)
		}
	}
}
