//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sandbox's /tmp and /dev are its own and hold nothing of the
// host's: naming them (or what is beneath them) among the paths to
// hide, or a workspace beneath /dev/shm, whose surroundings would be
// /dev, covers none of them (what is hidden in such a workspace stays
// hidden). Commands keep a writable /tmp and
// /dev/shm and the devices they need, and see nothing of the host's
// there.
func TestOwnTmpAndDevNotCovered(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Fatalf("/dev/shm: %v", err)
	}
	shmBase, err := os.MkdirTemp("/dev/shm", "pw-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shmBase) })
	inShm := filepath.Join(shmBase, "a", "ws")
	if err := os.MkdirAll(inShm, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, shmBase, "sibling.txt", "a/sibling.txt", "a/ws/.env", "a/ws/a.key")
	const command = "echo x > /dev/null && echo null-ok; head -c 3 /dev/zero | wc -c; " +
		"echo t > /tmp/t && cat /tmp/t && echo tmp-ok; echo s > /dev/shm/s && cat /dev/shm/s && echo shm-ok; " +
		"cat ../sibling.txt ../../sibling.txt .env a.key"
	for _, c := range []struct {
		name string
		ws   string
		hide []string
	}{
		{"workspace beneath /dev/shm", inShm, []string{filepath.Join(inShm, ".env"), filepath.Join(inShm, "*.key")}},
		{"/tmp hidden", workspaceOutsideTmp(t), []string{"/tmp"}},
		{"/dev/shm and /dev hidden", workspaceOutsideTmp(t), []string{"/dev/shm", "/dev"}},
		{"/tmp hidden, workspace beneath it", t.TempDir(), []string{"/tmp"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := resolvedConfig(t, c.ws, c.hide...)
			out, exit := runIn(t, cfg, c.ws, command)
			for _, want := range []string{"null-ok", "3\n", "tmp-ok", "shm-ok"} {
				if !strings.Contains(out, want) {
					t.Errorf("%q missing: %q %+v", want, out, exit)
				}
			}
			if strings.Contains(out, "SECRET") {
				t.Errorf("a neighbour of the workspace in the host's shared memory, or a path hidden in it, is visible: %q", out)
			}
		})
	}
}
