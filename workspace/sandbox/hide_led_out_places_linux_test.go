//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A link in the workspace (a command's) that leads where a link of
// EtcLinkDirs leads (openSUSE's TLS trust store, in /var/lib) cannot
// make later sandboxes hide it, as it cannot a directory of
// ReadableDirs: an exact path, a pattern's match and a pattern's
// directory that lead there lead nowhere, and ResolveHideNoting says
// so.
func TestResolveHideLeavesEtcLinkTargetsReadable(t *testing.T) {
	base, ws, _ := besideElsewhere(t)
	store, etc := filepath.Join(base, "ca-certificates"), filepath.Join(base, "etc")
	writeFiles(t, store, "a.pem")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	saved := EtcLinkDirs
	t.Cleanup(func() { EtcLinkDirs = saved })
	EtcLinkDirs = []string{etc}
	for link, to := range map[string]string{filepath.Join(etc, "certs"): store, filepath.Join(ws, "ca"): store,
		filepath.Join(ws, "pem"): filepath.Join(store, "a.pem")} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	hide := []string{filepath.Join(ws, "ca"), filepath.Join(ws, "ca", "*.pem"), filepath.Join(ws, "pem"),
		filepath.Join(ws, "ca", "later.key")}
	resolved, notes, err := ResolveHideNoting(hide, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resolved {
		if within(r.Path, store) {
			t.Errorf("ResolveHide kept %+v, where an /etc link leads: the trust store would be hidden", r)
		}
	}
	if len(notes) != len(hide) {
		t.Errorf("notes = %+v; want one for each of %q", notes, hide)
	}
}

// What the workspace's owner hid where a link in the workspace led out
// of it is hidden there at each later set-up, whatever became of the
// link: where the directory the link leads to has a wildcard in its
// name (se[c]), a link deeper in the workspace (a/sec) leads it, or a
// directory there is missing yet (sec/sub).
func TestHideLedOutKeptWhateverTheName(t *testing.T) {
	base, ws, _ := besideElsewhere(t)
	odd, plain := filepath.Join(base, "se[c]*?"), filepath.Join(base, "plain")
	for _, d := range []string{odd, plain, filepath.Join(ws, "a")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"odd": odd, "a/sec": plain, "sec": plain} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	hide := []string{filepath.Join(ws, "odd", "*.key"), filepath.Join(ws, "odd", "a.secret"),
		filepath.Join(ws, "a", "sec", "*.deep"), filepath.Join(ws, "sec", "sub", "a.key"),
		filepath.Join(ws, "sec", "sub2", "*.key")}
	resolved, err := ResolveHide(hide, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"odd", "a/sec", "sec"} {
		if err := os.Remove(filepath.Join(ws, l)); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, odd, "b.key", "a.secret", "plain.txt")
	writeFiles(t, plain, "c.deep")
	writeFiles(t, filepath.Join(plain, "sub"), "a.key")
	writeFiles(t, filepath.Join(plain, "sub2"), "d.key")
	plan, err := planHiding(nil, resolved, nil, ws, systemPlaces(ReadableDirs, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(odd, "b.key"), filepath.Join(odd, "a.secret"),
		filepath.Join(plain, "c.deep"), filepath.Join(plain, "sub", "a.key"), filepath.Join(plain, "sub2", "d.key")} {
		if !slices.Contains(plan.outside, want) {
			t.Errorf("%s, written where a link in the workspace led, is not hidden: %q (resolved %+v)", want, plan.outside, resolved)
		}
	}
	if slices.Contains(plan.outside, filepath.Join(odd, "plain.txt")) {
		t.Errorf("a file beside the keys is hidden: %q", plan.outside)
	}
}
