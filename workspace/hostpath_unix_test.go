//go:build unix

package workspace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What the model reads of a file call never shows a host path: not the
// path a file or directory has once moved out of the workspace, or
// deleted, between its open and the check of its name; not the absolute
// target a link was re-pointed to meanwhile; not the workspace's own
// path. Each change is made by hookBeforeName, between the open and the
// check, so the race is hit every time.
func TestFiles_NoHostPathInMessages(t *testing.T) {
	type call func(fx *fixture) (any, bool)
	read := func(path string) call {
		return func(fx *fixture) (any, bool) {
			r, err := fx.ws.ReadFile(t.Context(), ReadFileInput{Path: path})
			mustDo(t, err)
			return r, r.Success
		}
	}
	write := func(path string) call {
		return func(fx *fixture) (any, bool) {
			r, err := fx.ws.WriteFile(t.Context(), WriteFileInput{Path: path, Content: "written\n"})
			mustDo(t, err)
			return r, r.Success
		}
	}
	for _, tc := range []struct {
		name string
		// setup runs before the call, change between its open and the
		// check of the name opened.
		setup, change func(t *testing.T, fx *fixture)
		call          call
		// mayPass: the file opened was inside when opened, so the call
		// may also succeed on it.
		mayPass bool
	}{{
		name:   "link target moved out",
		setup:  linkTo("mover.txt", "sub/moving.txt"),
		change: moveOut("sub/moving.txt", "moved.txt"),
		call:   write("mover.txt"),
	}, {
		name:   "link target deleted",
		setup:  linkTo("doomed.txt", "sub/doomed.txt"),
		change: remove("sub/doomed.txt"),
		call:   write("doomed.txt"),
	}, {
		name:  "link re-pointed to an absolute path outside",
		setup: linkTo("abs.txt", "notes.txt"),
		change: func(t *testing.T, fx *fixture) {
			relink(t, filepath.Join(fx.root, "abs.txt"), filepath.Join(fx.outside, "secret.txt"))
		},
		call:    write("abs.txt"),
		mayPass: true, // into notes.txt, the file opened
	}, {
		name:   "file deleted",
		change: remove("notes.txt"),
		call:   read("notes.txt"),
	}, {
		name:    "file moved out",
		change:  moveOut("notes.txt", "notes.txt"),
		call:    read("notes.txt"),
		mayPass: true, // it was inside when opened
	}, {
		name:   "directory deleted",
		setup:  mkdir("gone"),
		change: remove("gone"),
		call:   read("gone/."),
	}, {
		name:   "directory moved out",
		setup:  mkdir("away"),
		change: moveOut("away", "away"),
		call:   read("away/."),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			eachNaming(t, func(t *testing.T, byPath bool) {
				fx := newFixture(t, nil).naming(byPath)
				if tc.setup != nil {
					tc.setup(t, fx)
				}
				changed := false
				fx.ws.hookBeforeName = func() {
					if !changed {
						changed = true
						tc.change(t, fx)
					}
				}
				res, ok := tc.call(fx)
				if !changed {
					t.Fatal("the change was not made between the open and the check")
				}
				out, err := json.Marshal(res)
				mustDo(t, err)
				if ok && !tc.mayPass {
					t.Errorf("call succeeded: %s", out)
				}
				if strings.Contains(string(out), fx.base) {
					t.Errorf("result shows a host path (%s): %s", fx.base, out)
				}
				if got := readFile(t, filepath.Join(fx.outside, "secret.txt")); got != secretContent {
					t.Errorf("outside secret.txt = %q", got)
				}
			})
		})
	}
}

func linkTo(name, target string) func(*testing.T, *fixture) {
	return func(t *testing.T, fx *fixture) {
		if !strings.Contains(target, "/") || strings.HasPrefix(target, "sub/") {
			writeFile(t, filepath.Join(fx.root, target), "inside\n")
		}
		mustDo(t, os.Symlink(target, filepath.Join(fx.root, name)))
	}
}

func mkdir(name string) func(*testing.T, *fixture) {
	return func(t *testing.T, fx *fixture) { mustDo(t, os.Mkdir(filepath.Join(fx.root, name), 0o755)) }
}

func moveOut(name, to string) func(*testing.T, *fixture) {
	return func(t *testing.T, fx *fixture) {
		mustDo(t, os.Rename(filepath.Join(fx.root, name), filepath.Join(fx.outside, to)))
	}
}

func remove(name string) func(*testing.T, *fixture) {
	return func(t *testing.T, fx *fixture) { mustDo(t, os.Remove(filepath.Join(fx.root, name))) }
}

// relink replaces the link at path by one to target.
func relink(t *testing.T, path, target string) {
	t.Helper()
	mustDo(t, os.Remove(path))
	mustDo(t, os.Symlink(target, path))
}

// realName's own refusals, before explain rewords those of a link on the
// way, show no host path either: the result need not pass through
// explain to be safe.
func TestRealName_NoHostPath(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		for _, tc := range []struct {
			name   string
			change func(t *testing.T, fx *fixture)
			// named: the file opened keeps a name inside, which the
			// kernel knows.
			named bool
		}{
			{"moved out", moveOut("sub/a.txt", "a.txt"), false},
			{"deleted", remove("sub/a.txt"), false},
			{"link re-pointed outside", func(t *testing.T, fx *fixture) {
				relink(t, filepath.Join(fx.root, "sub/link.txt"), filepath.Join(fx.outside, "secret.txt"))
			}, !byPath},
		} {
			t.Run(tc.name, func(t *testing.T) {
				fx := newFixture(t, nil).naming(byPath)
				mustDo(t, os.Symlink("a.txt", filepath.Join(fx.root, "sub/link.txt")))
				f, err := fx.ws.root.Open("sub/link.txt")
				mustDo(t, err)
				defer f.Close()
				tc.change(t, fx)
				for _, relative := range []bool{true, false} {
					name, rf := fx.ws.realName(f, "sub/link.txt", relative)
					if rf == nil {
						if relative && !tc.named {
							t.Errorf("realName(relative) = %q, want a refusal", name)
						}
						continue
					}
					if msg := rf.message(ReadFileToolName, "sub/link.txt"); strings.Contains(msg, fx.base) {
						t.Errorf("relative=%v: refusal shows a host path (%s): %s", relative, fx.base, msg)
					}
				}
			})
		}
	})
}
