//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file put from outside the tools at a path hidden from commands,
// after undo removed the file there, is never shown to a command: not to
// the one a sandbox prepared before it came is handed to, nor to any
// later one, of the workspace that removed it or of another open on the
// directory, whether that one ran a command since the removal or not.
// Nor is it taken for a move: what was hidden there is gone, and the
// path is hidden as one that held nothing as the workspace was opened,
// whatever comes there (the commands run).
func TestHiddenPathPlacedFromOutsideAfterUndoRemovalStaysHidden(t *testing.T) {
	requireSandbox(t)
	for _, ranSince := range []bool{true, false} {
		for _, other := range []bool{false, true} {
			name := map[bool]string{false: "the remover", true: "another"}[other] +
				map[bool]string{false: ", no command since", true: ", a command since"}[ranSince]
			t.Run(name, func(t *testing.T) { placedAfterRemoval(t, other, ranSince) })
		}
	}
}

// placedAfterRemoval is a case of
// TestHiddenPathPlacedFromOutsideAfterUndoRemovalStaysHidden.
func placedAfterRemoval(t *testing.T, other, ranSince bool) {
	dir := dirWithHiddenEnv(t)
	env := filepath.Join(dir, "cfg/.env")
	ws, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer ws.Close()
	remover := ws
	if other {
		remover, err = New(dir, hiddenEnvOptions(dir))
		mustDo(t, err)
		defer remover.Close()
	}
	run := func(what string) {
		t.Helper()
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat cfg/.env; echo ran"})
		mustDo(t, err)
		switch {
		case strings.Contains(res.Stdout, "SECRET") || strings.Contains(res.Stdout, "PLANTED"):
			t.Errorf("%s: a command read the hidden path: %+v", what, res)
		case !res.Sandboxed || !strings.HasSuffix(res.Stdout, "ran\n"):
			t.Errorf("%s: %+v; want the command run, the path hidden", what, res)
		}
	}
	if err := remover.restore(&writeRecord{Path: "cfg/.env"}); err != nil {
		t.Fatalf("undo's removal of cfg/.env: %v", err)
	}
	if ranSince {
		run("after undo removed cfg/.env")
	}
	// A sandbox is now prepared, with nothing at cfg/.env to cover, or
	// (no command since) the one prepared as the workspace was opened.
	mustDo(t, os.WriteFile(env, []byte("PLANTED"), 0o644))
	run("once a file was put at cfg/.env from outside")
	tmp := filepath.Join(dir, "new")
	mustDo(t, os.WriteFile(tmp, []byte("PLANTED-AGAIN"), 0o644))
	mustDo(t, os.Rename(tmp, env))
	run("once a file was renamed over cfg/.env from outside")
	mustDo(t, os.Remove(env))
	run("once it was removed from outside")
	mustDo(t, os.WriteFile(env, []byte("PLANTED-THIRD"), 0o644))
	run("once a file was put at cfg/.env again")
}
