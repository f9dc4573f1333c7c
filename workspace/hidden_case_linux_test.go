//go:build linux

package workspace

import (
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
