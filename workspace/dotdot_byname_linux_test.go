//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// The directory a path's "." and ".." lead to is named, without the
// kernel's name for it, as the path reads once cleaned when no link is
// on the way (dirByName), and that name is the one resolving the path
// through the root gives. With a link on the way, or a name that is
// not a directory, dirByName finds none and the root resolves the path.
func TestDirByName_AgreesWithTheRoot(t *testing.T) {
	fx := newFixture(t, nil)
	in := func(name string) string { return filepath.Join(fx.root, name) }
	mustDo(t, os.MkdirAll(in("box/inner"), 0o755))
	mustDo(t, os.MkdirAll(in("box/deep/er"), 0o755))
	mustDo(t, os.Symlink("box/inner", in("inner-link")))
	for _, c := range []struct {
		upTo   string
		byName bool
	}{
		{"sub/..", true},
		{"box/inner/..", true},
		{"box/deep/er/../..", true},
		{"./box/.", true},
		{"box/inner/../deep/.", true},
		{"box/../sub/..", true},
		{"inner-link/..", false}, // box, not the root
		{"box/../inner-link/..", false},
		{"self/.", false},
		{"up/..", false},
		{"notes.txt/..", false},
		{"missing/..", false},
	} {
		got, ok := fx.ws.dirByName(c.upTo)
		if ok != c.byName {
			t.Errorf("dirByName(%q) = %q, %v; want found %v", c.upTo, got, ok, c.byName)
		}
		want, rf := fx.ws.resolveDir(c.upTo)
		if ok && (rf != nil || got != want) {
			t.Errorf("dirByName(%q) = %q; through the root: %q, %v", c.upTo, got, want, rf)
		}
	}
}
