//go:build linux

package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The temporary file of a write of a path hidden from commands, left
// behind by a crash between its write and its rename, shows its content
// neither to commands nor to the file tools: it has a name of its own
// (hiddenTempName), which every sandbox hides where a hidden path's
// temporary file can be, read_file and write_file refuse and listings
// leave out; opening the workspace again removes it. The same holds of
// an undo's restore, and of a match of a pattern to hide.
func TestHiddenWriteTempLeftByACrash(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name, hide, file string
		undo             bool
	}{
		{"file at the top", ".env", ".env", false},
		{"file in a folder", "cfg/.env", "cfg/.env", false},
		{"match of a pattern", "keys/*.pem", "keys/a.pem", false},
		{"undo's restore", "cfg/.env", "cfg/.env", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mustDo(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(c.file)), 0o755))
			mustDo(t, os.WriteFile(filepath.Join(dir, c.file), []byte("OLD"), 0o600))
			opts := &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, c.hide)}}
			ws, err := New(dir, opts)
			mustDo(t, err)
			defer func() { ws.Close() }()
			ctx := context.Background()
			ws.hookCrash = func() bool { return true }
			if c.undo {
				if err := ws.restore(&writeRecord{Path: c.file, Existed: true, Perm: 0o600, Prev: []byte("SECRET")}); err == nil {
					t.Fatalf("undo's restore that crashed before its rename: no error")
				}
			} else if res, err := ws.WriteFile(ctx, WriteFileInput{Path: c.file, Content: "SECRET"}); err != nil || res.Success {
				t.Fatalf("write that crashed before its rename: %+v, %v; want it failed", res, err)
			}
			ws.hookCrash = nil
			folder := filepath.Dir(c.file)
			left := leftTemps(t, filepath.Join(dir, folder))
			if len(left) != 1 {
				t.Fatalf("the crash left %d temporary files in %s (%v), want one", len(left), folder, left)
			}
			temp := filepath.Join(folder, left[0])
			if got := readFile(t, filepath.Join(dir, temp)); got != "SECRET" {
				t.Fatalf("the temporary file left holds %q, want the content", got)
			}
			if got := readFile(t, filepath.Join(dir, c.file)); got != "OLD" {
				t.Errorf("the hidden file after the crash: %q, want it as it was", got)
			}

			res, err := ws.ReadFile(ctx, ReadFileInput{Path: temp})
			mustDo(t, err)
			if res.Success || strings.Contains(res.Content, "SECRET") {
				t.Errorf("read_file %s: %+v; want it refused", temp, res)
			}
			list, err := ws.ReadFile(ctx, ReadFileInput{Path: folder})
			mustDo(t, err)
			if slices.Contains(list.Files, left[0]) {
				t.Errorf("the listing of %s shows %s: %v", folder, left[0], list.Files)
			}
			run, err := ws.RunCommand(ctx, RunCommandInput{Command: "ls -a " + folder + "; cat " + temp + " 2>&1; cat " + folder + "/.polyweave* 2>&1; echo ran"})
			mustDo(t, err)
			if !run.Sandboxed || !strings.Contains(run.Stdout, "ran") {
				t.Fatalf("the command after the crash did not run: %+v", run)
			}
			if strings.Contains(run.Stdout, "SECRET") {
				t.Errorf("the command read the temporary file the crash left: %q", run.Stdout)
			}
			if res, err := ws.WriteFile(ctx, WriteFileInput{Path: temp, Content: "x"}); err != nil || res.Success {
				t.Errorf("write_file %s: %+v, %v; want it refused", temp, res, err)
			}

			// The next write of the path goes through.
			if c.undo {
				mustDo(t, ws.restore(&writeRecord{Path: c.file, Existed: true, Perm: 0o600, Prev: []byte("NEW")}))
			} else if res, err := ws.WriteFile(ctx, WriteFileInput{Path: c.file, Content: "NEW"}); err != nil || !res.Success {
				t.Fatalf("the write after the crash: %+v, %v", res, err)
			}
			if got := readFile(t, filepath.Join(dir, c.file)); got != "NEW" {
				t.Errorf("the hidden file after the next write: %q", got)
			}

			// Left behind again, then the workspace is opened again: the
			// temporary file is gone before any command runs.
			ws.hookCrash = func() bool { return true }
			_, _ = ws.WriteFile(ctx, WriteFileInput{Path: c.file, Content: "SECRET"})
			ws.hookCrash = nil
			if len(leftTemps(t, filepath.Join(dir, folder))) != 1 {
				t.Fatalf("the second crash left no temporary file")
			}
			mustDo(t, ws.Close())
			ws, err = New(dir, opts)
			mustDo(t, err)
			if left := leftTemps(t, filepath.Join(dir, folder)); len(left) != 0 {
				t.Errorf("opening the workspace again left %v in %s", left, folder)
			}
			if got := readFile(t, filepath.Join(dir, c.file)); got != "NEW" {
				t.Errorf("the hidden file after the workspace was opened again: %q", got)
			}
		})
	}
}

// leftTemps returns the names of the temporary files of writes in dir.
func leftTemps(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			names = append(names, e.Name())
		}
	}
	return names
}
