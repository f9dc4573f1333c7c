//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A name of a pattern to hide whose wildcards are all escaped
// (S\[1\], as the sandbox keeps a place's names) is a name, which the
// sandbox matches as written ([sandbox.Glob]): on a case-sensitive
// directory s[1] beside S[1] is another entry, which commands see, and
// a write there is not refused; one that is the same entry (a hard
// link of a symbolic link gives the test's directory two names,
// differing in case, for one, as a case-insensitive directory has) is.
func TestHiddenName_EscapedNameIsAName(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.root, name) }
	for _, d := range []string{"S[1]", "s[1]", "real"} {
		mustDo(t, os.Mkdir(in(d), 0o755))
		mustDo(t, os.WriteFile(filepath.Join(in(d), "key.txt"), nil, 0o644))
	}
	mustDo(t, os.Symlink("real", in("K[1]")))
	mustDo(t, os.Link(in("K[1]"), in("k[1]")))
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{
		{Path: in(`S\[1\]/key.txt`)}, {Path: in(`K\[1\]/*.txt`)}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })
	for name, want := range map[string]bool{
		"S[1]/key.txt": true, "K[1]/key.txt": true, "k[1]/key.txt": true, "k[1]/KEY.TXT": true,
		"s[1]/key.txt": false, "S[1]/other.txt": false,
	} {
		if got, _ := fx.ws.hiddenName(name); got != want {
			t.Errorf("hiddenName(%q) = %v, want %v", name, got, want)
		}
	}
}
