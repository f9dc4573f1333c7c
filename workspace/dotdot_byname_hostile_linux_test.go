//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// byNameTree adds to the fixture the directories and links the "." and
// ".." spellings below walk through.
func byNameTree(t *testing.T, fx *fixture) {
	t.Helper()
	in := func(name string) string { return filepath.Join(fx.root, name) }
	deep := strings.Repeat("d/", 60)
	for _, d := range []string{"box/inner", "box/deep/er", "box/...", "box/sp ace", "box/new\nline", "box/\xff\xfe", "box/" + deep} {
		mustDo(t, os.MkdirAll(in(d), 0o755))
	}
	writeFile(t, in("box/f.txt"), "box file\n")
	writeFile(t, in("box/secret.txt"), "inside\n")
	mustDo(t, os.Symlink("deep", in("box/to-deep")))  // its ".." is box, as cleaning says
	mustDo(t, os.Symlink("../sub", in("box/to-sub"))) // its ".." is the root, not box
	mustDo(t, os.Symlink("box", in("box-link")))
}

// The "." and ".." of hostile spellings are resolved as the kernel
// resolves them inside the root: by name (dirByName) only when no link
// is on the way and the path names a directory, and then to the name the
// root gives too; otherwise by the root, which refuses what leaves it and
// what the kernel finds no directory in.
func TestDirByName_HostileSpellings(t *testing.T) {
	fx := newFixture(t, nil)
	byNameTree(t, fx)
	deep := strings.Repeat("d/", 60)
	for _, c := range []struct {
		upTo   string
		byName bool
		dir    string // the directory upTo resolves to, when it does
		reason Reason // the refusal, when it does not
	}{
		{"sub/.", true, "sub", ""},
		{"sub/./.", true, "sub", ""},
		{"./sub/./../sub/.", true, "sub", ""},
		{"sub//..", true, ".", ""},
		{"sub//.//..", true, ".", ""},
		{"./.", true, ".", ""},
		{"box/deep/er/../../..", true, ".", ""},
		{"box/deep/er/../../../box/inner/..", true, "box", ""},
		{"box/" + deep + strings.Repeat("../", 60) + "..", true, ".", ""},
		{"box/.../..", true, "box", ""},
		{"box/.../.", true, "box/...", ""},
		{"box/sp ace/..", true, "box", ""},
		{"box/new\nline/..", true, "box", ""},
		{"box/\xff\xfe/..", true, "box", ""},
		{"box/to-deep/..", false, "box", ""},
		{"box/to-sub/..", false, ".", ""}, // cleaned, box: not what the kernel finds
		{"box/to-sub/.", false, "sub", ""},
		{"box-link/inner/..", false, "box", ""},
		{"box/../box-link/.", false, "box", ""},
		{"box/f.txt/..", false, "", ReasonNotDirectory},
		{"box/f.txt/.", false, "", ReasonNotDirectory},
		{"fifo.txt/..", false, "", ReasonNotDirectory},
		{"sock.txt/.", false, "", ReasonNotDirectory},
		{"box/missing/..", false, "", ReasonNotFound},
		{"box/sp ace /..", false, "", ReasonNotFound},
		{"dangling.txt/..", false, "", ReasonNotFound},
		{"loop1.txt/..", false, "", ReasonSymlinkLoop},
		{"up/..", false, "", ReasonEscapes},
		{"self/..", false, "", ReasonEscapes},
		{"out-dir/..", false, "", ReasonEscapes},
		{"out-dir-abs/.", false, "", ReasonEscapes},
		{"sibling-link/..", false, "", ReasonEscapes},
		{"box/to-sub/../..", false, "", ReasonEscapes},
	} {
		got, ok := fx.ws.dirByName(c.upTo)
		if ok != c.byName || ok && got != c.dir {
			t.Errorf("dirByName(%q) = %q, %v; want %q, %v", c.upTo, got, ok, c.dir, c.byName)
		}
		dir, rf := fx.ws.resolveDir(c.upTo)
		switch {
		case c.reason != "" && (rf == nil || rf.reason != c.reason):
			t.Errorf("resolveDir(%q) = %q, %v; want refused %q", c.upTo, dir, rf, c.reason)
		case c.reason == "" && (rf != nil || dir != c.dir):
			t.Errorf("resolveDir(%q) = %q, %v; want %q", c.upTo, dir, rf, c.dir)
		}
		name, rf := fx.ws.checkPath(c.upTo)
		switch {
		case c.reason != "" && (rf == nil || rf.reason != c.reason):
			t.Errorf("checkPath(%q) = %q, %v; want refused %q", c.upTo, name, rf, c.reason)
		case c.reason == "" && (rf != nil || name != c.dir):
			t.Errorf("checkPath(%q) = %q, %v; want %q", c.upTo, name, rf, c.dir)
		}
	}
}

// Paths that climb above the root lexically are refused before any
// lookup, whatever lies on the way.
func TestCheckPath_ClimbingAboveTheRootLexically(t *testing.T) {
	fx := newFixture(t, nil)
	byNameTree(t, fx)
	for _, p := range []string{
		"../x.txt", "sub/../../x.txt", "box/deep/../../../ws/notes.txt",
		strings.Repeat("../", 50) + "etc/passwd", "box/" + strings.Repeat("../", 3) + "outside/secret.txt",
		"./../x.txt", "sub/.//../..//x.txt",
	} {
		name, rf := fx.ws.checkPath(p)
		if rf == nil || rf.reason != ReasonEscapes {
			t.Errorf("checkPath(%q) = %q, %v; want refused %q", p, name, rf, ReasonEscapes)
		}
	}
}

// A directory on the way swapped, between the two opens of dirByName,
// for a link out of the workspace or for another directory: no name
// is found by name, and the root resolves the path as it is then.
func TestDirByName_SwappedBetweenTheOpens(t *testing.T) {
	for _, c := range []struct {
		name   string
		swap   func(in func(string) string) error
		reason Reason
	}{
		{"for a link out", func(in func(string) string) error {
			if err := os.Rename(in("box"), in("box-moved")); err != nil {
				return err
			}
			return os.Symlink("../outside", in("box"))
		}, ReasonEscapes},
		{"for another directory", func(in func(string) string) error {
			if err := os.Rename(in("box"), in("box-moved")); err != nil {
				return err
			}
			return os.MkdirAll(in("box/inner"), 0o755)
		}, ""},
		{"for a file", func(in func(string) string) error {
			if err := os.Rename(in("box"), in("box-moved")); err != nil {
				return err
			}
			return os.WriteFile(in("box"), nil, 0o644)
		}, ReasonNotDirectory},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t, nil)
			byNameTree(t, fx)
			in := func(name string) string { return filepath.Join(fx.root, name) }
			var once sync.Once
			var swapErr error
			fx.ws.hookBeforeName = func() { once.Do(func() { swapErr = c.swap(in) }) }
			dir, ok := fx.ws.dirByName("box/inner/..")
			mustDo(t, swapErr)
			if ok {
				t.Errorf("dirByName(box/inner/..) = %q after box was swapped between the opens", dir)
			}
			name, rf := fx.ws.checkPath("box/inner/../secret.txt")
			switch {
			case c.reason != "" && (rf == nil || rf.reason != c.reason):
				t.Errorf("checkPath(box/inner/../secret.txt) = %q, %v; want refused %q", name, rf, c.reason)
			case c.reason == "" && (rf != nil || name != "box/secret.txt"):
				t.Errorf("checkPath(box/inner/../secret.txt) = %q, %v; want box/secret.txt", name, rf)
			}
		})
	}
}

// A directory with no link on the way to its ".." swapped, over and
// over while the path is resolved and acted on, with a link out of the
// workspace and with another directory: what is read or written is
// inside the workspace, or the call is refused; never the file outside,
// and no message names a host path.
func TestFileTools_DotDotByNameWhileADirectoryIsSwapped(t *testing.T) {
	fx := newFixture(t, nil)
	byNameTree(t, fx)
	ctx := context.Background()
	in := func(name string) string { return filepath.Join(fx.root, name) }
	mustDo(t, os.Symlink("../outside", in("out-link")))
	mustDo(t, os.MkdirAll(in("decoy/inner"), 0o755))
	writeFile(t, in("decoy/secret.txt"), "decoy\n")

	// box is the directory, then the link out, then the link out again and the decoy, in turn.
	stop := exchangeUntilStopped(t, in("box"), in("out-link"), in("out-link"), in("decoy"))
	for range 300 {
		if t.Failed() {
			break
		}
		if dir, ok := fx.ws.dirByName("box/inner/.."); ok && dir != "box" {
			t.Errorf("dirByName(box/inner/..) = %q", dir)
		}
		for _, p := range []string{"box/inner/../secret.txt", "box/./secret.txt", "box/deep/er/../../secret.txt"} {
			res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: p})
			if err != nil {
				t.Error(err)
			}
			if res.Success && res.Content != "inside\n" && res.Content != "decoy\n" || strings.Contains(res.Content, secretContent) {
				t.Errorf("read_file %s read %q", p, res.Content)
			}
			if strings.Contains(res.Error, fx.base) {
				t.Errorf("read_file %s: %q names a host path", p, res.Error)
			}
		}
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "box/inner/.."})
		if err != nil {
			t.Error(err)
		}
		if res.Success && !strings.Contains(strings.Join(res.Files, " "), "inner") {
			t.Errorf("read_file box/inner/.. listed %q", res.Files)
		}
		if _, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "box/inner/../planted.txt", Content: "planted\n"}); err != nil {
			t.Error(err)
		}
	}
	stop()
	fx.checkOutsideUntouched(t, "box/inner/../planted.txt")
}

// dirByName and checkPath leave no descriptor open, whichever way a
// path goes: found by name, resolved by the root, or refused.
func TestDirByName_LeavesNoDescriptorOpen(t *testing.T) {
	fx := newFixture(t, nil)
	byNameTree(t, fx)
	beneath := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		mustDo(t, err)
		n := 0
		for _, e := range ents {
			if p, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(p, fx.base+"/") {
				n++
			}
		}
		return n
	}
	paths := []string{"sub/.", "box/deep/er/../..", "box/to-sub/..", "box/f.txt/..", "box/missing/..",
		"up/..", "out-dir/..", "loop1.txt/..", "fifo.txt/.", "box/" + strings.Repeat("d/", 60) + ".."}
	before := beneath()
	for range 20 {
		for _, p := range paths {
			fx.ws.dirByName(p)
			fx.ws.checkPath(p + "/x.txt")
		}
	}
	if after := beneath(); after != before {
		t.Errorf("%d descriptors beneath the workspace's parent open before, %d after", before, after)
	}
}
