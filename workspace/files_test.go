package workspace

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fixture is a workspace root surrounded by things it must not reach:
//
//	base/ws/           the workspace root
//	base/ws-secret/    a sibling sharing the root's name as a prefix
//	base/outside/      an ordinary outside directory
type fixture struct {
	base, root, outside, sibling string
	ws                           *Workspace
}

const (
	secretContent  = "outside secret\n"
	siblingContent = "sibling secret\n"
	envContent     = "TOKEN=do-not-leak\n"
	notesContent   = "hello notes\n"
)

// newFixture builds the hostile tree and a workspace on it that allows
// only .txt and .md files.
func newFixture(t *testing.T, opts *Options) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{
		base:    base,
		root:    filepath.Join(base, "ws"),
		outside: filepath.Join(base, "outside"),
		sibling: filepath.Join(base, "ws-secret"),
	}
	for _, d := range []string{fx.root, fx.outside, fx.sibling, filepath.Join(fx.root, "sub")} {
		mustDo(t, os.MkdirAll(d, 0o755))
	}
	in := func(name string) string { return filepath.Join(fx.root, name) }
	writeFile(t, filepath.Join(fx.outside, "secret.txt"), secretContent)
	writeFile(t, filepath.Join(fx.sibling, "key.txt"), siblingContent)
	writeFile(t, in("notes.txt"), notesContent)
	writeFile(t, in(".env"), envContent)
	writeFile(t, in("sub/a.txt"), "a\n")
	writeFile(t, in("big.txt"), strings.Repeat("a", 3<<20))
	writeFile(t, in("latin1.txt"), "caf\xe9 cr\xe8me\n")
	writeFile(t, in("zeros.txt"), "abc\x00def")
	writeFile(t, in("empty.txt"), "")
	writeFile(t, in("Makefile"), "all:\n")

	links := map[string]string{
		"out-file.txt":  "../outside/secret.txt",
		"out-abs.txt":   filepath.Join(fx.outside, "secret.txt"),
		"out-dir":       "../outside",
		"out-dir-abs":   fx.outside,
		"sibling-link":  "../ws-secret",
		"dangling.txt":  "missing.txt",
		"alias.txt":     ".env",
		"good-link.txt": "notes.txt",
		"sub-link.txt":  "sub/a.txt",
		"loop1.txt":     "loop2.txt",
		"loop2.txt":     "loop1.txt",
		"up":            "..",
		"self":          ".",
	}
	for name, target := range links {
		mustDo(t, os.Symlink(target, in(name)))
	}
	mustDo(t, os.Link(filepath.Join(fx.outside, "secret.txt"), in("hard.txt")))
	mustDo(t, mkfifo(in("fifo.txt")))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: in("sock.txt"), Net: "unix"})
	mustDo(t, err)
	l.SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })

	if opts == nil {
		opts = &Options{AllowedExtensions: []string{".txt", ".md"}}
	}
	fx.ws, err = New(fx.root, opts)
	mustDo(t, err)
	t.Cleanup(func() { mustDo(t, fx.ws.Close()) })
	return fx
}

// naming makes the fixture's workspace learn the names of the files it
// opens by resolving their paths through the root (byPath), or the way
// the system the tests run on does.
func (fx *fixture) naming(byPath bool) *fixture {
	fx.ws.nameByPath = byPath
	return fx
}

// eachNaming runs a test both ways the file tools learn the name of a
// file they opened: the way this system does (from the kernel, where it
// names open files), and by resolving the path through the root, as
// systems without /proc/self/fd do; so both are tested on every system.
func eachNaming(t *testing.T, run func(t *testing.T, byPath bool)) {
	t.Run("system", func(t *testing.T) { run(t, !kernelNames) })
	t.Run("by-path", func(t *testing.T) { run(t, true) })
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	mustDo(t, os.WriteFile(path, []byte(content), 0o644))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	mustDo(t, err)
	return string(b)
}

// hostileNames are the spellings of escapes and tricks every file tool
// must refuse, with the reason each must give.
var hostileNames = []struct {
	name, path string
	reason     Reason
}{
	{"dotdot alone", "..", ReasonEscapes},
	{"dotdot slash", "../", ReasonEscapes},
	{"dotdot to outside", "../outside/secret.txt", ReasonEscapes},
	{"dotdot twice", "../../etc/passwd.txt", ReasonEscapes},
	{"dot then dotdot", "./../outside/secret.txt", ReasonEscapes},
	{"dotdot after subdir", "sub/../../outside/secret.txt", ReasonEscapes},
	{"dotdot deep", "sub/a/b/../../../../outside/secret.txt", ReasonEscapes},
	{"dotdot double slash", "..//outside/secret.txt", ReasonEscapes},
	{"dotdot back into root", "../ws/notes.txt", ReasonEscapes},
	{"sibling by prefix", "../ws-secret/key.txt", ReasonEscapes},
	{"absolute system file", "/etc/passwd", ReasonAbsolute},
	{"absolute double slash", "//etc/passwd", ReasonAbsolute},
	{"absolute dotdot", "/../etc/passwd", ReasonAbsolute},
	{"percent dotdot", "%2e%2e/outside/secret.txt", ReasonPercentEncoded},
	{"percent slash", "..%2foutside%2fsecret.txt", ReasonPercentEncoded},
	{"percent upper", "%2E%2E%2Foutside%2Fsecret.txt", ReasonPercentEncoded},
	{"percent double encoded", "%252e%252e/outside/secret.txt", ReasonPercentEncoded},
	{"percent NUL", "notes.txt%00.md", ReasonPercentEncoded},
	{"backslash dotdot", `..\outside\secret.txt`, ReasonBackslash},
	{"backslash absolute", `\etc\passwd`, ReasonBackslash},
	{"backslash mixed", `sub\..\..\outside/secret.txt`, ReasonBackslash},
	{"NUL truncation", "notes.txt\x00.md", ReasonNUL},
	{"NUL alone", "\x00", ReasonNUL},
	{"long component", strings.Repeat("a", 300) + ".txt", ReasonNameTooLong},
	{"long path", strings.Repeat("abcdefghij/", 400) + "x.txt", ReasonNameTooLong},
	{"symlink to outside file", "out-file.txt", ReasonEscapes},
	{"absolute symlink to outside file", "out-abs.txt", ReasonEscapes},
	{"symlinked outside dir", "out-dir/secret.txt", ReasonEscapes},
	{"absolute symlinked outside dir", "out-dir-abs/secret.txt", ReasonEscapes},
	{"symlink to sibling by prefix", "sibling-link/key.txt", ReasonEscapes},
	{"symlink to parent", "up/outside/secret.txt", ReasonEscapes},
	{"dangling symlink", "dangling.txt", ReasonDanglingLink},
	{"symlink loop", "loop1.txt", ReasonSymlinkLoop},
	{"in-root symlink defeating extension list", "alias.txt", ReasonExtension},
	{"disallowed extension", ".env", ReasonExtension},
	{"no extension", "Makefile", ReasonExtension},
	{"hard link to outside file", "hard.txt", ReasonHardLink},
	{"FIFO", "fifo.txt", ReasonNotRegular},
	{"socket", "sock.txt", ReasonNotRegular},
	{"file as directory", "notes.txt/x.txt", ReasonNotDirectory},
	{"dotdot after a file", "notes.txt/../notes.txt", ReasonNotDirectory},
	{"dotdot after a missing name", "missing/../notes.txt", ReasonNotFound},
	{"dotdot after a link to the root", "self/../outside/secret.txt", ReasonEscapes},
	{"dotdot after a link to the parent", "up/../notes.txt", ReasonEscapes},
}

func TestReadFile_HostileInput(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		ctx := t.Context()
		for _, tc := range hostileNames {
			t.Run(tc.name, func(t *testing.T) {
				res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: tc.path})
				if err != nil {
					t.Fatalf("Go error %v; tool failures must be results", err)
				}
				assertRefused(t, res.Success, res.Reason, res.Error, tc.path, tc.reason)
				if res.Content != "" || res.Files != nil {
					t.Errorf("refused read returned data: %+v", res)
				}
			})
		}
	})
}

func TestWriteFile_HostileInput(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		ctx := t.Context()
		for _, tc := range hostileNames {
			t.Run(tc.name, func(t *testing.T) {
				res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: tc.path, Content: "pwned\n"})
				if err != nil {
					t.Fatalf("Go error %v; tool failures must be results", err)
				}
				assertRefused(t, res.Success, res.Reason, res.Error, tc.path, tc.reason)
			})
		}
		// Nothing outside changed and nothing was created there, and the
		// protected files inside are intact.
		if got := readFile(t, filepath.Join(fx.outside, "secret.txt")); got != secretContent {
			t.Errorf("outside secret changed: %q", got)
		}
		if got := readFile(t, filepath.Join(fx.sibling, "key.txt")); got != siblingContent {
			t.Errorf("sibling secret changed: %q", got)
		}
		if got := readFile(t, filepath.Join(fx.root, ".env")); got != envContent {
			t.Errorf(".env changed: %q", got)
		}
		assertTree(t, fx.outside, []string{"secret.txt"})
		assertTree(t, fx.sibling, []string{"key.txt"})
		assertTree(t, fx.base, []string{"outside", "ws", "ws-secret"})
		assertNoTemp(t, fx.root)
	})
}

func assertRefused(t *testing.T, success bool, got Reason, msg, path string, want Reason) {
	t.Helper()
	if success {
		t.Fatalf("call succeeded; want refusal %q", want)
	}
	if got != want {
		t.Errorf("reason %q, want %q (error %q)", got, want, msg)
	}
	if !strings.Contains(msg, string(want)) {
		t.Errorf("error %q does not say %q", msg, want)
	}
	// The message names the path (quoted, so NUL and long names are safe
	// to show); a long path is cut and its length said, not echoed whole.
	if len(path) > maxShownPath {
		if strings.Contains(msg, path) || !strings.Contains(msg, strconv.Quote(path[:maxShownPath])+"… ("+strconv.Itoa(len(path))+" bytes)") {
			t.Errorf("error %q does not name the long path by its beginning and length", msg)
		}
		if len(msg) > 2*maxShownPath+200 {
			t.Errorf("error for a %d-byte path is %d bytes long", len(path), len(msg))
		}
		return
	}
	if q := strconv.Quote(path); !strings.Contains(msg, q) {
		t.Errorf("error %q does not name the path %s", msg, q)
	}
}

func assertTree(t *testing.T, dir string, want []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	mustDo(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

// assertNoTemp checks that no temporary write file is left in the tree.
func assertNoTemp(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	mustDo(t, err)
}

// Names that look hostile but stay inside the root get a safe result: the
// file they really name inside the root, or not found.
func TestReadFile_SafeLookalikes(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		cases := []struct {
			name, path string
			content    string // want this content, or:
			reason     Reason // want this refusal
		}{
			{"dotdot inside", "sub/../notes.txt", notesContent, ""},
			{"dot prefix", "./notes.txt", notesContent, ""},
			{"trailing dots name", "...", "", ReasonNotFound},
			{"dots as a name", ".../notes.txt", "", ReasonNotFound},
			{"fullwidth dots", "\uff0e\uff0e/outside/secret.txt", "", ReasonNotFound},
			{"one dot leaders", "\u2024\u2024/outside/secret.txt", "", ReasonNotFound},
			{"tilde", "~/notes.txt", "", ReasonNotFound},
			{"lone percent", "100%.txt", "", ReasonNotFound},
			{"in-root symlink", "good-link.txt", notesContent, ""},
			{"in-root symlink into subdir", "sub-link.txt", "a\n", ""},
			{"through root symlink", "self/notes.txt", notesContent, ""},
			// As the system resolves it: self/.. is the root's parent, so
			// the path names the outside secret (cleaned, it would read as
			// outside/secret.txt inside the root).
			{"symlink to root then dotdot", "self/../outside/secret.txt", "", ReasonEscapes},
			{"through parent symlink back in", "up/ws/notes.txt", "", ReasonEscapes},
			{"missing", "missing.txt", "", ReasonNotFound},
			{"empty file", "empty.txt", "", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res, err := fx.ws.ReadFile(t.Context(), ReadFileInput{Path: tc.path})
				mustDo(t, err)
				if tc.reason != "" {
					assertRefused(t, res.Success, res.Reason, res.Error, tc.path, tc.reason)
					return
				}
				if !res.Success || res.Content != tc.content || res.Truncated || res.Binary {
					t.Errorf("got %+v, want content %q", res, tc.content)
				}
			})
		}
	})
}

func TestReadFile_Content(t *testing.T) {
	fx := newFixture(t, nil)
	ctx := t.Context()

	t.Run("very large file is cut at the cap", func(t *testing.T) {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "big.txt"})
		mustDo(t, err)
		if !res.Success || !res.Truncated || len(res.Content) != DefaultMaxReadBytes || res.Bytes != 3<<20 {
			t.Errorf("success=%v truncated=%v len=%d bytes=%d", res.Success, res.Truncated, len(res.Content), res.Bytes)
		}
	})
	t.Run("non-UTF-8 is binary", func(t *testing.T) {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "latin1.txt"})
		mustDo(t, err)
		if !res.Success || !res.Binary || res.Content != "" || res.Bytes != 11 {
			t.Errorf("got %+v, want binary without content", res)
		}
	})
	t.Run("NUL bytes are binary", func(t *testing.T) {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "zeros.txt"})
		mustDo(t, err)
		if !res.Success || !res.Binary || res.Content != "" {
			t.Errorf("got %+v, want binary without content", res)
		}
	})
	t.Run("cut inside a rune stays valid UTF-8", func(t *testing.T) {
		writeFile(t, filepath.Join(fx.root, "runes.txt"), strings.Repeat("é", 10)) // 20 bytes
		ws, err := New(fx.root, &Options{MaxReadBytes: 7})
		mustDo(t, err)
		defer ws.Close()
		res, err := ws.ReadFile(ctx, ReadFileInput{Path: "runes.txt"})
		mustDo(t, err)
		if !res.Success || res.Binary || !res.Truncated || res.Content != "ééé" {
			t.Errorf("got %+v, want ééé truncated", res)
		}
	})
	t.Run("file of exactly the cap is whole", func(t *testing.T) {
		writeFile(t, filepath.Join(fx.root, "seven.txt"), "1234567")
		ws, err := New(fx.root, &Options{MaxReadBytes: 7})
		mustDo(t, err)
		defer ws.Close()
		res, err := ws.ReadFile(ctx, ReadFileInput{Path: "seven.txt"})
		mustDo(t, err)
		if !res.Success || res.Truncated || res.Content != "1234567" {
			t.Errorf("got %+v, want whole file", res)
		}
	})
}

// A listing with a name that is not UTF-8 says how to reach that file,
// whose name the JSON cannot show.
func TestReadFile_ListingNonUTF8Name(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad\xff.txt"), nil, 0o644); err != nil {
		t.Skipf("this file system refuses a name that is not UTF-8: %v", err)
	}
	mustDo(t, os.WriteFile(filepath.Join(dir, "good.txt"), nil, 0o644))
	ws, err := New(dir, &Options{Sandbox: SandboxOff})
	mustDo(t, err)
	defer ws.Close()
	res, err := ws.ReadFile(t.Context(), ReadFileInput{Path: "."})
	mustDo(t, err)
	if !res.Success || !strings.Contains(res.Hint, "not valid UTF-8") || !strings.Contains(res.Hint, "run_command") {
		t.Errorf("listing = %+v, want a hint on the name that is not UTF-8", res)
	}
	mustDo(t, os.Remove(filepath.Join(dir, "bad\xff.txt")))
	if res, err = ws.ReadFile(t.Context(), ReadFileInput{Path: "."}); err != nil || res.Hint != listHint {
		t.Errorf("listing of UTF-8 names = %+v, %v, want the plain hint", res, err)
	}
}

func TestReadFile_Listing(t *testing.T) {
	fx := newFixture(t, nil)
	ctx := t.Context()
	root := []string{".env", "Makefile", "alias.txt", "big.txt", "dangling.txt", "empty.txt", "fifo.txt", "good-link.txt",
		"hard.txt", "latin1.txt", "loop1.txt", "loop2.txt", "notes.txt", "out-abs.txt", "out-dir", "out-dir-abs",
		"out-file.txt", "self", "sibling-link", "sock.txt", "sub", "sub-link.txt", "up", "zeros.txt"}
	for _, path := range []string{"", "   ", "\n", "."} {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: path})
		mustDo(t, err)
		// The root is ".", as the model names it: the host's path is not shown.
		if !res.Success || !res.IsDirectory || res.Path != "." || res.Truncated || !slices.Equal(res.Files, root) {
			t.Errorf("listing for %q: %+v", path, res)
		}
		if b, _ := res.MarshalJSON(); strings.Contains(string(b), fx.root) {
			t.Errorf("listing for %q shows the host path: %s", path, b)
		}
	}
	res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "sub"})
	mustDo(t, err)
	if !res.Success || !res.IsDirectory || res.Path != "sub" || !slices.Equal(res.Files, []string{"a.txt"}) {
		t.Errorf("listing sub: %+v", res)
	}
	res, err = fx.ws.ReadFile(ctx, ReadFileInput{Path: "out-dir"})
	mustDo(t, err)
	assertRefused(t, res.Success, res.Reason, res.Error, "out-dir", ReasonEscapes)

	t.Run("bounded and sorted", func(t *testing.T) {
		dir := filepath.Join(fx.root, "many")
		mustDo(t, os.Mkdir(dir, 0o755))
		var want []string
		for i := range 1500 {
			name := string(rune('a'+i%26)) + strings.Repeat("x", i%7) + "-" + string(rune('A'+i/26%26)) + string(rune('0'+i/676))
			want = append(want, name)
			writeFile(t, filepath.Join(dir, name), "")
		}
		slices.Sort(want)
		ws, err := New(fx.root, &Options{MaxListEntries: 100})
		mustDo(t, err)
		defer ws.Close()
		res, err := ws.ReadFile(ctx, ReadFileInput{Path: "many"})
		mustDo(t, err)
		if !res.Success || !res.Truncated || !slices.Equal(res.Files, want[:100]) {
			t.Errorf("got %d files truncated=%v, first %q; want the first 100 sorted", len(res.Files), res.Truncated, res.Files[:3])
		}
	})
}

func TestWriteFile(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		ctx := t.Context()
		in := func(name string) string { return filepath.Join(fx.root, name) }

		t.Run("creates missing parents", func(t *testing.T) {
			res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "new/deep/file.md", Content: "# deep\n"})
			mustDo(t, err)
			if !res.Success || res.Path != "new/deep/file.md" || res.Bytes != 7 {
				t.Fatalf("got %+v", res)
			}
			if got := readFile(t, in("new/deep/file.md")); got != "# deep\n" {
				t.Errorf("content %q", got)
			}
		})
		t.Run("replaces and keeps mode", func(t *testing.T) {
			mustDo(t, os.Chmod(in("sub/a.txt"), 0o600))
			res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "sub/a.txt", Content: "é"})
			mustDo(t, err)
			if !res.Success || res.Bytes != 2 {
				t.Fatalf("got %+v", res)
			}
			fi, err := os.Stat(in("sub/a.txt"))
			mustDo(t, err)
			if fi.Mode().Perm() != 0o600 || readFile(t, in("sub/a.txt")) != "é" {
				t.Errorf("mode %v content %q", fi.Mode().Perm(), readFile(t, in("sub/a.txt")))
			}
		})
		t.Run("writes through an in-root symlink", func(t *testing.T) {
			res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "good-link.txt", Content: "via link\n"})
			mustDo(t, err)
			if !res.Success {
				t.Fatalf("got %+v", res)
			}
			if got := readFile(t, in("notes.txt")); got != "via link\n" {
				t.Errorf("notes.txt = %q", got)
			}
			if fi, err := os.Lstat(in("good-link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("link replaced: %v %v", fi, err)
			}
		})
		t.Run("directory is refused", func(t *testing.T) {
			res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "sub", Content: "x"})
			mustDo(t, err)
			// "sub" has no extension, so the allow-list refuses it first; a
			// workspace without a list reaches the directory check.
			assertRefused(t, res.Success, res.Reason, res.Error, "sub", ReasonExtension)
			ws, err := New(fx.root, nil)
			mustDo(t, err)
			defer ws.Close()
			res, err = ws.WriteFile(ctx, WriteFileInput{Path: "sub", Content: "x"})
			mustDo(t, err)
			assertRefused(t, res.Success, res.Reason, res.Error, "sub", ReasonIsDirectory)
		})
		t.Run("empty path", func(t *testing.T) {
			res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: " ", Content: "x"})
			mustDo(t, err)
			assertRefused(t, res.Success, res.Reason, res.Error, " ", ReasonEmptyPath)
		})
		t.Run("failed write leaves old content", func(t *testing.T) {
			ws, err := New(fx.root, nil)
			mustDo(t, err)
			defer ws.Close()
			ws.hookBeforeRename = func() error { return errors.New("disk on fire") }
			before := readFile(t, in("notes.txt"))
			res, err := ws.WriteFile(ctx, WriteFileInput{Path: "notes.txt", Content: "half-written"})
			mustDo(t, err)
			assertRefused(t, res.Success, res.Reason, res.Error, "notes.txt", ReasonIO)
			if !strings.Contains(res.Error, "disk on fire") {
				t.Errorf("error %q lacks the cause", res.Error)
			}
			if got := readFile(t, in("notes.txt")); got != before {
				t.Errorf("notes.txt = %q, want the old %q", got, before)
			}
		})
		assertNoTemp(t, fx.root)
	})
}

func TestWorkspace_Lifecycle(t *testing.T) {
	dir := t.TempDir()
	ws, err := New(dir, nil)
	mustDo(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ws.ReadFile(ctx, ReadFileInput{Path: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	mustDo(t, ws.Close())
	mustDo(t, ws.Close())
	if _, err := ws.ReadFile(t.Context(), ReadFileInput{}); !errors.Is(err, ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := ws.WriteFile(t.Context(), WriteFileInput{Path: "x", Content: ""}); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	if _, err := ws.RunCommand(t.Context(), RunCommandInput{Command: "true"}); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close: %v", err)
	}
}

func TestNew_Options(t *testing.T) {
	dir := t.TempDir()
	bad := []Options{
		{AllowedExtensions: []string{}},
		{AllowedExtensions: []string{"md"}},
		{AllowedExtensions: []string{".a/b"}},
		{MaxReadBytes: -1},
		{CommandTimeout: -1},
		{InheritEnv: []string{"A=B"}},
		{Shell: "/no/such/shell"},
	}
	for _, o := range bad {
		if ws, err := New(dir, &o); err == nil {
			ws.Close()
			t.Errorf("New accepted %+v", o)
		}
	}
	if _, err := New(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("New accepted a missing root")
	}
	writeFile(t, filepath.Join(dir, "f"), "")
	if _, err := New(filepath.Join(dir, "f"), nil); err == nil {
		t.Error("New accepted a file as root")
	}
	// The caller's slice is copied.
	exts := []string{".md"}
	ws, err := New(dir, &Options{AllowedExtensions: exts})
	mustDo(t, err)
	defer ws.Close()
	exts[0] = ".sh"
	if !ws.extAllowed("x.MD") || ws.extAllowed("x.sh") {
		t.Error("extension list not copied or not case-insensitive")
	}
}

// A name flipped between a regular file and a link to outside, while the
// tools use it, never yields or changes the outside file: the check and
// the use are the same os.Root descriptor walk, not two lookups.
func TestFiles_SwapRace(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, &Options{}).naming(byPath)
		swap := filepath.Join(fx.root, "swap.txt")
		tmpLink := filepath.Join(fx.root, "swap-link.tmp")
		tmpFile := filepath.Join(fx.root, "swap-file.tmp")
		stop := make(chan struct{})
		flipped := make(chan struct{})
		go func() {
			defer close(flipped)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Replace swap.txt atomically by a link to outside or a file.
				if i%2 == 0 {
					os.Remove(tmpLink)
					_ = os.Symlink("../outside/secret.txt", tmpLink)
					_ = os.Rename(tmpLink, swap)
				} else {
					_ = os.WriteFile(tmpFile, []byte("inside\n"), 0o644)
					_ = os.Rename(tmpFile, swap)
				}
			}
		}()
		for range 300 {
			r, err := fx.ws.ReadFile(t.Context(), ReadFileInput{Path: "swap.txt"})
			mustDo(t, err)
			if strings.Contains(r.Content, "secret") {
				t.Fatalf("read reached outside: %+v", r)
			}
			w, err := fx.ws.WriteFile(t.Context(), WriteFileInput{Path: "swap.txt", Content: "written\n"})
			mustDo(t, err)
			// Depending on the moment, the write succeeds inside or is
			// refused; either is safe as long as outside stays untouched.
			if !w.Success && w.Reason == "" {
				t.Errorf("refusal without a reason: %+v", w)
			}
		}
		close(stop)
		<-flipped
		if got := readFile(t, filepath.Join(fx.outside, "secret.txt")); got != secretContent {
			t.Fatalf("outside file changed to %q", got)
		}
	})
}

// A link re-pointed between the open and the check of the name opened
// (from .env to notes.txt) does not lend the file read or written the
// allowed name: the name checked is the open file's, or the call is
// refused.
func TestFiles_RepointedBeforeName(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		link := filepath.Join(fx.root, "alias.txt")
		repoint := func(target string) {
			if err := os.Remove(link); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Error(err)
			}
		}
		fx.ws.hookBeforeName = func() { repoint("notes.txt") }
		r, err := fx.ws.ReadFile(t.Context(), ReadFileInput{Path: "alias.txt"})
		mustDo(t, err)
		if r.Success || strings.Contains(r.Content, "TOKEN") {
			t.Fatalf("read through the re-pointed link: %+v", r)
		}
		if r.Reason != ReasonExtension && r.Reason != ReasonIO {
			t.Errorf("read refused with %q (%s), want %q or %q", r.Reason, r.Error, ReasonExtension, ReasonIO)
		}
		repoint(".env")
		w, err := fx.ws.WriteFile(t.Context(), WriteFileInput{Path: "alias.txt", Content: "pwned\n"})
		mustDo(t, err)
		if w.Success {
			t.Fatalf("write through the re-pointed link: %+v", w)
		}
		if w.Reason != ReasonExtension && w.Reason != ReasonIO {
			t.Errorf("write refused with %q (%s), want %q or %q", w.Reason, w.Error, ReasonExtension, ReasonIO)
		}
		if got := readFile(t, filepath.Join(fx.root, ".env")); got != envContent {
			t.Errorf(".env = %q", got)
		}
		if got := readFile(t, filepath.Join(fx.root, "notes.txt")); got != notesContent {
			t.Errorf("notes.txt = %q", got)
		}
		assertNoTemp(t, fx.root)
	})
}

// Chains of links inside the root, through parents and directories, are
// followed to the file they name, and the allow-list applies to its name.
func TestFiles_LinkChains(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		in := func(name string) string { return filepath.Join(fx.root, name) }
		mustDo(t, os.Symlink("../good-link.txt", in("sub/chain.txt")))
		mustDo(t, os.Symlink("../sub", in("sub/again")))
		// In a link's target, again/.. is the parent of what again names.
		mustDo(t, os.Symlink("./again/../alias.txt", in("sub/env-chain.txt")))
		for _, tc := range []struct {
			path, content string
			reason        Reason
		}{
			{"sub/chain.txt", notesContent, ""},
			{"sub/again/again/a.txt", "a\n", ""},
			{"sub/env-chain.txt", "", ReasonExtension},
		} {
			r, err := fx.ws.ReadFile(t.Context(), ReadFileInput{Path: tc.path})
			mustDo(t, err)
			if tc.reason != "" {
				assertRefused(t, r.Success, r.Reason, r.Error, tc.path, tc.reason)
				continue
			}
			if !r.Success || r.Content != tc.content {
				t.Errorf("read %s: %+v, want %q", tc.path, r, tc.content)
			}
		}
		w, err := fx.ws.WriteFile(t.Context(), WriteFileInput{Path: "sub/again/chain.txt", Content: "chained\n"})
		mustDo(t, err)
		if !w.Success {
			t.Fatalf("write through the chain: %+v", w)
		}
		if got := readFile(t, in("notes.txt")); got != "chained\n" {
			t.Errorf("notes.txt = %q", got)
		}
		w, err = fx.ws.WriteFile(t.Context(), WriteFileInput{Path: "sub/env-chain.txt", Content: "pwned\n"})
		mustDo(t, err)
		assertRefused(t, w.Success, w.Reason, w.Error, "sub/env-chain.txt", ReasonExtension)
		if got := readFile(t, in(".env")); got != envContent {
			t.Errorf(".env = %q", got)
		}
	})
}
