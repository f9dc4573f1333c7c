package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file tools' refusals say what the model needs to act on them.
func TestFiles_ModelFacingMessages(t *testing.T) {
	fx := newFixture(t, &Options{MaxWriteBytes: 1 << 10})
	ctx := t.Context()

	t.Run("trailing slash on a file", func(t *testing.T) {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "notes.txt/"})
		mustDo(t, err)
		assertRefused(t, res.Success, res.Reason, res.Error, "notes.txt/", ReasonTrailingSlash)
		dir, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "sub/"})
		mustDo(t, err)
		if !dir.Success || !dir.IsDirectory {
			t.Errorf("sub/ does not list the directory: %+v", dir)
		}
	})
	t.Run("write to newdir/ creates nothing", func(t *testing.T) {
		res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "newdir/", Content: "x"})
		mustDo(t, err)
		assertRefused(t, res.Success, res.Reason, res.Error, "newdir/", ReasonTrailingSlash)
		if _, err := os.Lstat(filepath.Join(fx.root, "newdir")); !os.IsNotExist(err) {
			t.Errorf("newdir exists after a refused write: %v", err)
		}
	})
	t.Run("write too large", func(t *testing.T) {
		res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "big-write.txt", Content: strings.Repeat("x", 1<<10+1)})
		mustDo(t, err)
		assertRefused(t, res.Success, res.Reason, res.Error, "big-write.txt", ReasonTooLarge)
		if !strings.Contains(res.Error, "1025 bytes") || !strings.Contains(res.Error, "at most 1024") {
			t.Errorf("error %q does not give the size and the limit", res.Error)
		}
		if _, err := os.Lstat(filepath.Join(fx.root, "big-write.txt")); !os.IsNotExist(err) {
			t.Errorf("a refused write created the file: %v", err)
		}
	})
	t.Run("link to outside says it is a link", func(t *testing.T) {
		for _, path := range []string{"out-file.txt", "out-dir/secret.txt"} {
			res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: path})
			mustDo(t, err)
			link := strings.SplitN(path, "/", 2)[0]
			if res.Reason != ReasonEscapes || !strings.Contains(res.Error, `"`+link+`" is a symbolic link to a place outside the workspace`) {
				t.Errorf("%s: %q", path, res.Error)
			}
		}
	})
	t.Run("trailing space is shown", func(t *testing.T) {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "notes.txt "})
		mustDo(t, err)
		if !strings.Contains(res.Error, `"notes.txt "`) || !strings.Contains(res.Error, "white space at its start or end") {
			t.Errorf("error %q", res.Error)
		}
	})
	t.Run("no temporary file names", func(t *testing.T) {
		ws, err := New(fx.root, &Options{Sandbox: SandboxOff})
		mustDo(t, err)
		defer ws.Close()
		ws.hookBeforeRename = func() error { return &os.PathError{Op: "rename", Path: "x", Err: os.ErrPermission} }
		res, err := ws.WriteFile(ctx, WriteFileInput{Path: "notes.txt", Content: "new"})
		mustDo(t, err)
		if res.Success || strings.Contains(res.Error, tempPrefix) {
			t.Errorf("error %q", res.Error)
		}
		assertNoTemp(t, fx.root)
	})
}

// A workspace whose directory was removed says so, rather than "no such
// file" for every name.
func TestFiles_WorkspaceGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	mustDo(t, os.Mkdir(dir, 0o755))
	ws, err := New(dir, &Options{Sandbox: SandboxOff})
	mustDo(t, err)
	defer ws.Close()
	mustDo(t, os.Remove(dir))
	res, err := ws.ReadFile(t.Context(), ReadFileInput{Path: "a.txt"})
	mustDo(t, err)
	assertRefused(t, res.Success, res.Reason, res.Error, "a.txt", ReasonWorkspaceGone)
	wres, err := ws.WriteFile(t.Context(), WriteFileInput{Path: "a.txt", Content: "x"})
	mustDo(t, err)
	assertRefused(t, wres.Success, wres.Reason, wres.Error, "a.txt", ReasonWorkspaceGone)
}

// The root is resolved once: a symbolic link to it is followed at New,
// and commands start in that very directory even after the link moves.
func TestNew_RootResolvedOnce(t *testing.T) {
	base := t.TempDir()
	real1, real2 := filepath.Join(base, "one"), filepath.Join(base, "two")
	mustDo(t, os.Mkdir(real1, 0o755))
	mustDo(t, os.Mkdir(real2, 0o755))
	link := filepath.Join(base, "link")
	mustDo(t, os.Symlink("one", link))
	for _, mode := range []SandboxMode{SandboxOff, SandboxAuto} {
		ws, err := New(link, &Options{Sandbox: mode})
		mustDo(t, err)
		if ws.Dir() != real1 {
			t.Errorf("Dir() = %s, want %s", ws.Dir(), real1)
		}
		mustDo(t, os.Remove(link))
		mustDo(t, os.Symlink("two", link))
		res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: "echo here > marker"})
		mustDo(t, err)
		if res.ExitCode != 0 {
			t.Fatalf("mode %d: %+v", mode, res)
		}
		if got := readFile(t, filepath.Join(real1, "marker")); got != "here\n" {
			t.Errorf("mode %d: marker in the resolved root = %q", mode, got)
		}
		if _, err := os.Stat(filepath.Join(real2, "marker")); !os.IsNotExist(err) {
			t.Errorf("mode %d: the command followed the moved link", mode)
		}
		ws.Close()
		mustDo(t, os.Remove(filepath.Join(real1, "marker")))
		mustDo(t, os.Remove(link))
		mustDo(t, os.Symlink("one", link))
	}
}

func TestNew_SystemRootsRefused(t *testing.T) {
	for _, root := range []string{"", "  ", "/", "/etc", "/usr", "/proc", "/tmp", "/usr/../etc"} {
		ws, err := New(root, nil)
		if err == nil {
			ws.Close()
			t.Errorf("New(%q) succeeded", root)
			continue
		}
		// An empty root is refused as a bad path, not as a system root.
		if system := strings.TrimSpace(root) != ""; errors.Is(err, ErrSystemRoot) != system {
			t.Errorf("New(%q): %v; errors.Is(err, ErrSystemRoot) = %v, want %v", root, err, !system, system)
		}
	}
	ws, err := New("/", &Options{AllowSystemRoot: true, Sandbox: SandboxOff})
	if err != nil {
		t.Fatalf("New(/) with AllowSystemRoot: %v", err)
	}
	ws.Close()
}

// What is beneath the system's configuration, program and kernel
// directories is refused as they are; beneath homes, temporary files,
// data and /usr/local, /usr/src is not.
func TestNew_BeneathSystemDirectoriesRefused(t *testing.T) {
	for _, root := range []string{"/proc/sys", "/dev/shm", "/etc/cron.d", "/usr/share/doc", "/sys/kernel"} {
		if _, err := os.Stat(root); err != nil {
			continue // not on this system; isSystemDir is checked below
		}
		if ws, err := New(root, &Options{Sandbox: SandboxOff}); err == nil {
			ws.Close()
			t.Errorf("New(%q) succeeded", root)
		} else if !errors.Is(err, ErrSystemRoot) || !strings.Contains(err.Error(), "system directory") {
			t.Errorf("New(%q): %v, want a system directory refusal", root, err)
		}
	}
	for dir, want := range map[string]bool{
		"/etc/cron.d": true, "/proc/sys": true, "/dev/shm": true, "/usr/lib/x": true, "/boot/efi": true,
		"/usr/local/bin/x": true, "/private/etc/ssh": true, "/etcetera": false, "/usr/local/src/p": false,
		"/usr/src/linux": false, "/usr/local/p": false, "/home/u/p": false, "/tmp/x": false,
		"/var/tmp/x": false, "/var/lib/app": false, "/private/tmp/x": false, "/srv/www": false,
	} {
		if got := isSystemDir(dir); got != want {
			t.Errorf("isSystemDir(%q) = %v, want %v", dir, got, want)
		}
	}
	ws, err := New("/proc/sys", &Options{AllowSystemRoot: true, Sandbox: SandboxOff})
	if err == nil {
		ws.Close()
	} else if _, serr := os.Stat("/proc/sys"); serr == nil {
		t.Errorf("New(/proc/sys) with AllowSystemRoot: %v", err)
	}
}
