//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A command that puts a link to a crowded directory out of the
// workspace at a pattern's directory (own, for own/*.pem, which holds
// no match: what does is a mount point, which no command can remove
// or rename) cannot keep
// commands from running once the workspace is opened again, which
// follows the link: the directory, where more than crowd matches lie,
// is hidden whole, with one cover, rather than match by match (more
// than MaxHidden of them would fail every set-up with
// ErrTooManyHidden), and nothing in it is visible.
func TestCommandLinkToCrowdedDirectoryHidesItWhole(t *testing.T) {
	ws, _ := linkedOutOfShm(t)
	crowded := filepath.Join(dirOutsideTmp(t), "crowded")
	if err := os.Mkdir(crowded, 0o755); err != nil {
		t.Fatal(err)
	}
	makeMatches(t, crowded, 0, MaxHidden+1)
	writeFiles(t, crowded, "a.pem", "plain.txt")
	hide := filepath.Join(ws, "own", "*.pem")
	cfg := resolvedConfig(t, ws, hide)
	cfg.WithoutLandlock = true
	out, _ := runIn(t, cfg, ws, "ln -s "+crowded+" own && echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	reopened := resolvedConfig(t, ws, hide)
	reopened.WithoutLandlock = true
	out, exit := runIn(t, reopened, ws, "cat "+crowded+"/a.pem "+crowded+"/plain.txt own/a.pem; ls "+crowded+" | wc -l; echo ran")
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("with a command's link to a crowded directory: %q %+v", out, exit)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("what the crowded directory holds is visible: %q", out)
	}
}

// A place a link in the workspace led a pattern to as the workspace
// was opened (sec -> /elsewhere/sec, for sec/*.pem), where more than
// crowd matches appear since, is hidden whole at each set-up: no
// number of files written there fails every set-up, and none is
// visible. With few matches only they are hidden (plain.txt beside
// them is not).
func TestLedOutPlaceCrowdedSinceHiddenWhole(t *testing.T) {
	ws, sec, cfg := keptWhereLinkLed(t, "*.pem", "a.pem", "plain.txt")
	out, _ := runIn(t, cfg, ws, "cat "+sec+"/a.pem "+sec+"/plain.txt")
	if strings.Contains(out, "SECRET-a.pem") || !strings.Contains(out, "SECRET-plain.txt") {
		t.Fatalf("with one match, it alone is hidden: %q", out)
	}
	makeMatches(t, sec, 0, MaxHidden+1)
	writeFiles(t, sec, "b.pem")
	out, exit := runIn(t, cfg, ws, "cat "+sec+"/a.pem "+sec+"/b.pem "+sec+"/plain.txt; ls "+sec+" | wc -l; echo ran")
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("with %d matches where the link led: %q %+v", MaxHidden+2, out, exit)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("what the crowded place holds is visible: %q", out)
	}
}

// An entry that matches more than MaxHidden paths through a link in
// the workspace out of it, in directories none crowded enough to be
// hidden whole, is refused as the workspace opens, with an error that
// names the link and says how to mend it, not left to fail every
// set-up with no word of the link.
func TestTooManyHiddenThroughLinkNamesTheLink(t *testing.T) {
	ws, scattered := t.TempDir(), dirOutsideTmp(t)
	for i := range MaxHidden + 1 {
		d := filepath.Join(scattered, strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		makeMatches(t, d, 0, 1)
	}
	if err := os.Symlink(scattered, filepath.Join(ws, "own")); err != nil {
		t.Fatal(err)
	}
	_, err := ResolveHide([]string{filepath.Join(ws, "own", "*", "*.pem")}, ws)
	if !errors.Is(err, ErrTooManyHidden) {
		t.Fatalf("ResolveHide: %v, want ErrTooManyHidden", err)
	}
	for _, want := range []string{filepath.Join(ws, "own"), scattered, "remove"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// What a command's link to the host's /tmp (own -> /tmp/many, for
// own/*.pem) matched there as the workspace opened, however many,
// counts for nothing towards MaxHidden at a set-up, which covers
// nothing there: the sandbox's /tmp is its own.
func TestMatchesInHostTmpNotCounted(t *testing.T) {
	ws := workspaceOutsideTmp(t)
	var fixed []HiddenPath
	for i := range MaxHidden + 1 {
		fixed = append(fixed, HiddenPath{Path: "/tmp/many/f" + strconv.Itoa(i) + ".pem", Dev: 1, Ino: uint64(i + 1)})
	}
	plan, err := planHiding(nil, fixed, nil, ws, systemPlaces(ReadableDirs, nil))
	if err != nil {
		t.Fatalf("with %d paths to hide in the host's /tmp: %v", len(fixed), err)
	}
	for _, h := range plan.outside {
		if within(h, "/tmp") {
			t.Errorf("%s, in the host's /tmp, is to be covered", h)
		}
	}
}

// Entries that each lead through a link in the workspace to fewer than
// MaxHidden paths, but to more than that together, are refused as the
// workspace opens, naming a link, as one entry would be: a set-up
// bounds what it hides in all, and would otherwise fail every command
// with no word of the links.
func TestTooManyHiddenThroughLinksTogetherNamesALink(t *testing.T) {
	ws, base := t.TempDir(), dirOutsideTmp(t)
	var hide, links []string
	for _, name := range []string{"a", "b"} {
		scattered := filepath.Join(base, name)
		for i := range MaxHidden/2/crowd + 1 {
			d := filepath.Join(scattered, strconv.Itoa(i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			makeMatches(t, d, 0, crowd)
		}
		link := filepath.Join(ws, name)
		if err := os.Symlink(scattered, link); err != nil {
			t.Fatal(err)
		}
		hide, links = append(hide, filepath.Join(link, "*", "*.pem")), append(links, link)
	}
	resolved, err := ResolveHide(hide, ws)
	if err == nil {
		_, err = planHiding(nil, resolved, nil, ws, systemPlaces(ReadableDirs, nil))
		t.Fatalf("ResolveHide kept %d paths; a set-up then fails: %v", len(resolved), err)
	}
	if !errors.Is(err, ErrTooManyHidden) || !errors.Is(err, ErrConfig) {
		t.Fatalf("ResolveHide: %v, want ErrTooManyHidden and ErrConfig", err)
	}
	if !strings.Contains(err.Error(), links[0]) && !strings.Contains(err.Error(), links[1]) || !strings.Contains(err.Error(), "remove") {
		t.Errorf("the error names neither link, or not how to mend it: %v", err)
	}
}
