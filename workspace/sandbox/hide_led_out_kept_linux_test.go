//go:build linux

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A link made, since the workspace was opened, in a place a link in
// the workspace led a pattern to (sec/* with sec -> /elsewhere/sec),
// that leads where a link of EtcLinkDirs leads (the system's programs
// or configuration kept outside ReadableDirs) leads nowhere at a
// set-up, as one into ReadableDirs does: what is there stays readable
// to commands, and a program there runs. Hidden, it would fail every
// command of a shell kept there.
func TestLedOutMatchIntoEtcLinkTargetLeadsNowhere(t *testing.T) {
	requireRootForOwnEtcLinkDir(t)
	ws, sec := linkedOutOfShm(t)
	base := dirOutsideTmp(t)
	tools, etc := filepath.Join(base, "tools"), filepath.Join(base, "etc")
	for _, d := range []string{tools, etc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tools, "prog"), []byte("#!/bin/sh\necho tool-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tools, filepath.Join(etc, "tools")); err != nil {
		t.Fatal(err)
	}
	saved := EtcLinkDirs
	t.Cleanup(func() { EtcLinkDirs = saved })
	EtcLinkDirs = []string{etc}
	cfg := resolvedConfig(t, ws, filepath.Join(ws, "sec", "*"))
	if err := os.Symlink(tools, filepath.Join(sec, "t")); err != nil {
		t.Fatal(err)
	}
	out, exit := runIn(t, cfg, ws, filepath.Join(tools, "prog"))
	if !strings.Contains(out, "tool-ran") || exit.Code != 0 {
		t.Errorf("a program where a link of EtcLinkDirs leads, which a link where a link in the workspace led "+
			"leads to too, did not run: %q %+v", out, exit)
	}
}

// The names of the place a link in the workspace led a pattern to,
// kept with their wildcards escaped (see HiddenPath.LedOut), are
// names: each set-up looks them up as written, byte for byte, not
// whatever their case. Beside S[1] on a case-sensitive directory, s[1]
// is another directory, whose keys are not hidden; a name that is not
// UTF-8 leads to itself.
func TestLedOutEscapedNamesMatchedAsWritten(t *testing.T) {
	base, ws, _ := besideElsewhere(t)
	upper, lower, odd := filepath.Join(base, "S[1]"), filepath.Join(base, "s[1]"), filepath.Join(base, "b[\xff]")
	for _, d := range []string{upper, lower, odd} {
		if err := os.Mkdir(d, 0o755); errors.Is(err, fs.ErrExist) {
			t.Skipf("%s folds case: S[1] and s[1] are one directory", base)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"up": upper, "odd": odd} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	resolved, err := ResolveHide([]string{filepath.Join(ws, "up", "*.key"), filepath.Join(ws, "odd", "*.key")}, ws)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, upper, "a.key")
	writeFiles(t, lower, "b.key")
	writeFiles(t, odd, "c.key")
	plan, err := planHiding(nil, resolved, nil, ws, systemPlaces(ReadableDirs, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(upper, "a.key"), filepath.Join(odd, "c.key")} {
		if !slices.Contains(plan.outside, want) {
			t.Errorf("%q, written where a link in the workspace led, is not hidden: %q (resolved %+v)", want, plan.outside, resolved)
		}
	}
	if slices.Contains(plan.outside, filepath.Join(lower, "b.key")) {
		t.Errorf("a key in s[1], beside S[1] where the link led, is hidden: %q", plan.outside)
	}
}
