//go:build linux

package sandbox

import (
	"path/filepath"
	"strings"
	"testing"
)

// A pattern's components with a wildcard match names whatever their
// case: *.pem hides KEY.PEM, whether it matched when the paths to hide
// were resolved or only at a set-up, as it hides a.pem, on a
// case-sensitive directory too (on a case-insensitive one the case a
// name was written in is chance). A component without a wildcard is a
// name, looked up as written: keys/*.pem does not hide KEYS/a.pem on
// a case-sensitive directory, where KEYS is another directory.
func TestHidePatternMatchesWhateverTheCase(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, "KEY.PEM", "keys/b.Pem")
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.pem"), filepath.Join(dir, "keys", "*.pem"))
	writeFiles(t, dir, "Late.pEm", "keys/LATE.PEM", "KEYS/c.pem")
	out, _ := runIn(t, cfg, dir, "cat KEY.PEM keys/b.Pem Late.pEm keys/LATE.PEM KEYS/c.pem")
	if shown := strings.ReplaceAll(out, "SECRET-KEYS/c.pem", ""); shown == out || strings.Contains(shown, "SECRET") {
		t.Errorf("a match of a pattern differing in case from it is visible, or KEYS/c.pem (not keys/c.pem) is not: %q", out)
	}
}
