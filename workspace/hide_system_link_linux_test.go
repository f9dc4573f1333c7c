//go:build linux

package workspace

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A path to hide that a link in the workspace leads into a system
// directory (.env -> /etc) is not hidden, in case the link is a
// command's (see sandbox.ResolveHide): New says so in its log, at the
// warning level, naming the entry and where it leads, and says nothing
// of an entry hidden as configured.
func TestNewWarnsOfPathToHideLinkedIntoSystem(t *testing.T) {
	dir := t.TempDir()
	mustDo(t, os.Symlink("/etc", filepath.Join(dir, ".env")))
	mustDo(t, os.WriteFile(filepath.Join(dir, "plain.key"), []byte("SECRET"), 0o644))
	etc, err := filepath.EvalSymlinks("/etc")
	mustDo(t, err)
	var logs lockedBuffer
	ws, err := New(dir, &Options{HidePaths: []string{filepath.Join(dir, ".env"), filepath.Join(dir, "*.key")},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mustDo(t, err)
	mustDo(t, ws.Close())
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "system directory") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "entry="+filepath.Join(dir, ".env")) ||
		!strings.Contains(warned[0], "leadsTo="+etc) {
		t.Errorf("New's warnings of paths to hide a link led into a system directory: %q; want one, of .env, "+
			"leading to %s (log %q)", warned, etc, logs.String())
	}
}
