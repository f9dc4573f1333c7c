//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A name that differs only in case from a path to hide is compared
// with it entry by entry from the workspace's root, following no link:
// a command's link on the way to the path to hide, here to a directory
// outside the workspace, is not looked through, so what it leads to
// (which the command chooses, and may change between the check and
// the write) decides nothing. SEC and PAT are directories of the
// workspace, sec and pat a command's links to one outside, whose
// key.txt and a.key are the very entries SEC/KEY.TXT and PAT/A.KEY are
// (hard links of those links). Followed, the links made each pair of
// names one; they are not: SEC is another directory than sec.
func TestHiddenName_FollowsNoLinkOfTheHiddenPath(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.ws.dir, name) }
	away := filepath.Join(fx.outside, "away")
	for _, d := range []string{in("SEC"), in("PAT"), away} {
		mustDo(t, os.Mkdir(d, 0o755))
	}
	for name, outside := range map[string]string{"SEC/KEY.TXT": "key.txt", "PAT/A.KEY": "a.key"} {
		mustDo(t, os.Symlink("../notes.txt", in(name)))
		mustDo(t, os.Link(in(name), filepath.Join(away, outside)))
	}
	mustDo(t, os.Symlink(away, in("sec")))
	mustDo(t, os.Symlink(away, in("pat")))
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{{Path: in("sec/key.txt")}, {Path: in("pat/*.key")}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })

	for _, name := range []string{"SEC/KEY.TXT", "PAT/A.KEY"} {
		if hidden, folded := fx.ws.hiddenName(name); hidden {
			t.Errorf("hiddenName(%q) = true (differs in case from %q), through a command's link out of the workspace; want false",
				name, folded)
		}
	}
	// Entries of the workspace are still compared: sec and SEC one entry
	// (a hard link of the link, as a case-insensitive directory has one
	// entry for both names) make SEC/KEY.TXT the path to hide.
	mustDo(t, os.Remove(in("SEC/KEY.TXT")))
	mustDo(t, os.Remove(in("SEC")))
	mustDo(t, os.Link(in("sec"), in("SEC")))
	if hidden, _ := fx.ws.hiddenName("SEC/KEY.TXT"); !hidden {
		t.Errorf("hiddenName(SEC/KEY.TXT), SEC the very entry sec is, = false; want true")
	}
}
