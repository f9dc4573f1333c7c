//go:build linux

package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// On a case-insensitive directory (vfat, exfat, ntfs3, ext4 with
// casefold) "SEC/KEY.TXT" names what "sec/key.txt" names: a write to
// it through a command's link is one to the path to hide, and is
// refused as such. The test's directory is case-sensitive; a hard link
// of a symbolic link gives it what a case-insensitive one has: two
// names, differing in case, for one entry. Names that differ in case
// and name different entries, as on a case-sensitive directory, are
// not paths to hide, unless a pattern's wildcard matches them (y.PEM
// for *.pem), which it does whatever their case, as the sandbox hides
// them. One that does not exist yet, in the directory of
// a path to hide that does not either, and differs from it in case
// only, is taken for it: whether that directory folds case is not
// known, and refusing is the safe side.
func TestHiddenName_ComparesEntriesNotCase(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.root, name) }
	mustDo(t, os.Remove(in(".env")))
	mustDo(t, os.Mkdir(in("real"), 0o755))
	for link, target := range map[string]string{".env": "notes.txt", "sec": "real", "x.pem": "notes.txt",
		"deep": "real", ".Env": "notes.txt", "Sec": "real", "y.PEM": "notes.txt"} {
		mustDo(t, os.Symlink(target, in(link)))
	}
	for name, same := range map[string]string{".ENV": ".env", "SEC": "sec", "X.PEM": "x.pem", "DEEP": "deep"} {
		mustDo(t, os.Link(in(same), in(name)))
	}
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{
		{Path: in(".env")}, {Path: in("sec/key.txt")}, {Path: in("*.pem")}, {Path: in("deep/d/*.key")}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })

	for name, want := range map[string]bool{
		".env": true, ".ENV": true, "sec/key.txt": true, "SEC/KEY.TXT": true, "SEC/key.txt": true,
		"sec/KEY.TXT": true, "x.pem": true, "X.PEM": true, "DEEP/D/A.KEY": true,
		"y.PEM": true,
		".Env":  false, "Sec/key.txt": false, "Sec/KEY.TXT": false,
		"sec/other.txt": false, "SEC/other.txt": false, "DEEP/D/A.TXT": false, "notes.txt": false,
	} {
		if got, _ := fx.ws.hiddenName(name); got != want {
			t.Errorf("hiddenName(%q) = %v, want %v", name, got, want)
		}
		if rf := fx.ws.linkToHidden(name); (rf != nil) != want || rf != nil && rf.reason != ReasonLinkToHidden {
			t.Errorf("linkToHidden(%q) = %v, want refused %v", name, rf, want)
		}
	}
}

// A write refused because its name differs only in case from a path to
// hide says so, and names that path: on a case-sensitive directory the
// name is another file, which commands see, and the one who wrote it
// would otherwise be told it is hidden. A name that is the path to hide
// is refused without a word of case.
func TestLinkToHidden_SaysWhenOnlyCaseDiffers(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.root, name) }
	mustDo(t, os.Mkdir(in("real"), 0o755))
	mustDo(t, os.Symlink("real", in("cfg")))
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{{Path: in("cfg/.env")}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })

	rf := fx.ws.linkToHidden("cfg/.ENV")
	if rf == nil || rf.reason != ReasonLinkToHidden {
		t.Fatalf("linkToHidden(cfg/.ENV) = %v, want refused (%s)", rf, ReasonLinkToHidden)
	}
	if msg := rf.message(WriteFileToolName, "cfg/.ENV"); !strings.Contains(msg, `differs only in case from "cfg/.env"`) {
		t.Errorf("the refusal of cfg/.ENV does not say it differs only in case from cfg/.env: %s", msg)
	}
	rf = fx.ws.linkToHidden("cfg/.env")
	if rf == nil || strings.Contains(rf.detail, "case") {
		t.Errorf("linkToHidden(cfg/.env) = %v, want refused without a word of case", rf)
	}
}

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

// A path to hide that is an ancestor of the workspace hides what is
// around the workspace, which stays visible in it (sandbox.CheckHide):
// nothing in the workspace is a path to hide for it, and a write through
// a link there is not refused. A path to hide inside still is.
func TestLinkToHidden_AncestorHidesNothingInside(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.ws.dir, name) }
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{
		{Path: filepath.Dir(fx.ws.dir)}, {Path: filepath.Dir(filepath.Dir(fx.ws.dir))}, {Path: in("cfg/.env")}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })
	mustDo(t, os.Symlink("sub", in("lnk")))
	mustDo(t, os.Symlink("sub", in("cfg"))) // a command's, on the way to cfg/.env

	for _, name := range []string{"good-link.txt", "lnk/a.txt", "lnk/new.txt"} {
		if rf := fx.ws.linkToHidden(name); rf != nil {
			t.Errorf("linkToHidden(%q) with an ancestor of the workspace to hide = %v; want nil", name, rf)
		}
	}
	if rf := fx.ws.linkToHidden("cfg/.env"); rf == nil || rf.reason != ReasonLinkToHidden {
		t.Errorf("linkToHidden(cfg/.env), a path to hide = %v; want refused (%s)", rf, ReasonLinkToHidden)
	}
}

// The same with a real sandbox: with the workspace's parent hidden, a
// command's link in the workspace is written through, and commands see
// what was written (the workspace is not hidden).
func TestWriteFile_ThroughLinkWithAncestorHidden(t *testing.T) {
	requireSandbox(t)
	dir := dirOutsideTmp(t)
	mustDo(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
	ws, err := New(filepath.Join(dir, "ws"), &Options{Sandbox: SandboxRequired, HidePaths: []string{dir}})
	mustDo(t, err)
	defer ws.Close()
	runSandboxed(t, ws, "echo old > notes.txt; ln -s notes.txt link.txt")
	res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "link.txt", Content: "new\n"})
	mustDo(t, err)
	if !res.Success {
		t.Fatalf("write_file through a command's link, the workspace's parent hidden: %+v; want it written", res)
	}
	if out := runSandboxed(t, ws, "cat notes.txt"); strings.TrimSpace(out.Stdout) != "new" {
		t.Errorf("a command reads %q from notes.txt after the write; want %q", out.Stdout, "new\n")
	}
}

// A command's link planted at a path to hide after the write's name was
// checked, before the write chose what it replaces, is not written
// through: the write follows a link to a path to hide only if it saw
// none at the check, and the choice of what it replaces, made on the
// link itself, refuses it as the check would have. The content does
// not land where the link leads, a file commands see.
func TestWriteFile_LinkPlantedAfterTheCheck(t *testing.T) {
	fx, in := hidingFixture(t, "*.pem", "cfg/.env")
	for _, name := range []string{"x.pem", "cfg/.env"} {
		mustDo(t, os.MkdirAll(in("cfg"), 0o755))
		to, err := filepath.Rel(filepath.Dir(in(name)), in("notes.txt"))
		mustDo(t, err)
		fx.ws.hookAfterCheck = func() { mustDo(t, os.Symlink(to, in(name))) }
		res, err := fx.ws.WriteFile(context.Background(), WriteFileInput{Path: name, Content: "secret\n"})
		mustDo(t, err)
		if res.Success || res.Reason != ReasonLinkToHidden {
			t.Errorf("write_file %s, a link to notes.txt planted there after the check: %+v; want refused (%s)",
				name, res, ReasonLinkToHidden)
		}
		if got := readFile(t, in("notes.txt")); got != notesContent {
			t.Errorf("notes.txt after the write of %s: %q; want it untouched", name, got)
		}
		fx.ws.hookAfterCheck = nil
		mustDo(t, os.Remove(in(name)))
	}
}

// A command that swaps a directory on the way to a path to hide for a
// link to a directory commands see, after the write's name was checked
// (the directory did not exist then, or was a directory), does not get
// the content written there: the write reaches the directory of what
// it replaces following no link, and refuses when a link is on the
// way to a path to hide, as the check would have. The content lands
// neither in the directory the link leads to nor anywhere else.
func TestWriteFile_ParentSwappedAfterTheCheck(t *testing.T) {
	fx, in := hidingFixture(t, "cfg/.env", "a/b/*.key")
	mustDo(t, os.Mkdir(in("pub"), 0o755))
	for _, c := range []struct {
		name, swapped string // the path written, the directory swapped for a link to pub
		existed       bool   // whether that directory existed at the check
	}{
		{"cfg/.env", "cfg", false},
		{"cfg/.env", "cfg", true},
		{"a/b/x.key", "a", true},
		{"a/b/x.key", "a/b", true},
		{"a/b/x.key", "a", false},
	} {
		if c.existed {
			mustDo(t, os.MkdirAll(in(c.name), 0o755))
			mustDo(t, os.Remove(in(c.name)))
		}
		mustDo(t, os.MkdirAll(in(filepath.Join("pub", strings.TrimPrefix(filepath.Dir(c.name), c.swapped))), 0o755))
		to, err := filepath.Rel(filepath.Dir(in(c.swapped)), in("pub"))
		mustDo(t, err)
		fx.ws.hookAfterCheck = func() {
			mustDo(t, os.RemoveAll(in(c.swapped)))
			mustDo(t, os.Symlink(to, in(c.swapped)))
		}
		res, err := fx.ws.WriteFile(context.Background(), WriteFileInput{Path: c.name, Content: "secret\n"})
		mustDo(t, err)
		fx.ws.hookAfterCheck = nil
		if res.Success || res.Reason != ReasonLinkToHidden {
			t.Errorf("write_file %s, %s swapped for a link to pub after the check (existed %v): %+v; want refused (%s)",
				c.name, c.swapped, c.existed, res, ReasonLinkToHidden)
		}
		assertNoFiles(t, in("pub"), fmt.Sprintf("write_file %s, %s swapped for a link to pub (existed %v)",
			c.name, c.swapped, c.existed))
		mustDo(t, os.RemoveAll(in("pub")))
		mustDo(t, os.Mkdir(in("pub"), 0o755))
		mustDo(t, os.RemoveAll(in(strings.SplitN(c.name, "/", 2)[0])))
	}
	// A name that is not a path to hide is written through the link, as
	// it would have been had the link been there at the check.
	fx.ws.hookAfterCheck = func() { mustDo(t, os.Symlink("pub", in("cfg"))) }
	res, err := fx.ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/seen.txt", Content: "seen\n"})
	mustDo(t, err)
	fx.ws.hookAfterCheck = nil
	if !res.Success || readFile(t, in("pub/seen.txt")) != "seen\n" {
		t.Errorf("write_file cfg/seen.txt, cfg made a link to pub after the check: %+v; want pub/seen.txt written", res)
	}
}

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
