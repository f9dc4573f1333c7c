//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readableThroughLink makes a directory tools outside /tmp, with an
// executable tool in it that prints TOOL-RAN, and a link to it named
// in ReadableDirs for the test (as /snap leads to /var/lib/snapd/snap
// on some systems, or /opt to a larger disk): it returns tools,
// resolved, and the link.
func readableThroughLink(t *testing.T) (tools, link string) {
	t.Helper()
	base := dirOutsideTmp(t)
	tools, link = filepath.Join(base, "tools"), filepath.Join(base, "opt")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "tool"), []byte("#!/bin/sh\necho TOOL-RAN\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tools, link); err != nil {
		t.Fatal(err)
	}
	tools, err := filepath.EvalSymlinks(tools)
	if err != nil {
		t.Fatal(err)
	}
	saved := ReadableDirs
	t.Cleanup(func() { ReadableDirs = saved })
	ReadableDirs = append(saved[:len(saved):len(saved)], link)
	return tools, link
}

// A directory of ReadableDirs that is a link (/opt -> /data/opt) is a
// system place where it leads: a command's link there, at a pattern's
// directory, leads the pattern nowhere once the workspace is opened
// again, and the crowded directory is not hidden whole, so that what
// commands run from it still runs.
func TestCommandLinkToReadableDirThroughLinkLeadsNowhere(t *testing.T) {
	ws, _ := linkedOutOfShm(t)
	tools, link := readableThroughLink(t)
	makeMatches(t, tools, 0, crowd+1)
	hide := filepath.Join(ws, "own", "*.pem")
	cfg := resolvedConfig(t, ws, hide)
	out, _ := runIn(t, cfg, ws, "ln -s "+link+" own && echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	resolved, notes, err := ResolveHideNoting([]string{hide}, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resolved {
		if within(r.Path, tools) || within(tools, r.Path) {
			t.Errorf("ResolveHide kept %+v, where a directory of ReadableDirs leads", r)
		}
	}
	if len(notes) != 1 {
		t.Errorf("notes = %+v; want one for %s", notes, hide)
	}
	reopened := resolvedConfig(t, ws, hide)
	out, exit := runIn(t, reopened, ws, link+"/tool")
	if !strings.Contains(out, "TOOL-RAN") || exit.Code != 0 {
		t.Errorf("a program beneath %s (a directory of ReadableDirs, through a link): %q %+v", link, out, exit)
	}
}

// A set-up leaves alone, where a link in the workspace led a pattern
// out of it, what leads into a directory of ReadableDirs as the host
// has them (the sandbox's helper is another process, with the
// package's defaults), resolved: links there to more than crowd files
// of such a directory do not hide it whole.
func TestLedOutPlaceLeavesReadableDirThroughLinkAlone(t *testing.T) {
	ws, sec, cfg := keptWhereLinkLed(t, "*.pem", "a.pem")
	tools, link := readableThroughLink(t)
	for i := range crowd + 1 {
		n := "t" + strconv.Itoa(i)
		if err := os.WriteFile(filepath.Join(tools, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(tools, n), filepath.Join(sec, n+".pem")); err != nil {
			t.Fatal(err)
		}
	}
	out, exit := runIn(t, cfg, ws, link+"/tool && cat "+sec+"/a.pem; echo ran")
	if !strings.Contains(out, "TOOL-RAN") || !strings.Contains(out, "ran") {
		t.Errorf("a program beneath %s (a directory of ReadableDirs, through a link): %q %+v", link, out, exit)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("a match where the link led is visible: %q", out)
	}
}

// A program beneath a directory of ReadableDirs that is a link is
// runnable with Landlock, which follows the link.
func TestCheckRunnableThroughReadableLink(t *testing.T) {
	tools, _ := readableThroughLink(t)
	ws := t.TempDir()
	if err := (Protections{Landlock: 1}).CheckRunnable(filepath.Join(tools, "tool"), ws); err != nil {
		t.Errorf("CheckRunnable: %v", err)
	}
}
