package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A ".." after a symbolic link to a directory goes to the parent of the
// directory the link names, as the kernel resolves it, not to the
// directory the link sits in; and a trailing "." names a directory or
// nothing (ENOTDIR). The file tools read, list and write what the system
// would, or refuse as it would.
func TestFileTools_DotDotAfterALinkAndTrailingDot(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		ctx := context.Background()
		mustDo(t, os.MkdirAll(filepath.Join(fx.root, "sub", "inner"), 0o755))
		writeFile(t, filepath.Join(fx.root, "sub", "notes.txt"), "sub notes\n")
		mustDo(t, os.Symlink("sub/inner", filepath.Join(fx.root, "inner-link")))

		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "inner-link/../notes.txt"})
		if err != nil || res.Content != "sub notes\n" {
			t.Errorf("read_file inner-link/../notes.txt: content %q, reason %q, %v; want sub/notes.txt's", res.Content, res.Reason, err)
		}
		res, err = fx.ws.ReadFile(ctx, ReadFileInput{Path: "inner-link/.."})
		if err != nil || !res.Success || !strings.Contains(strings.Join(res.Files, " "), "inner") {
			t.Errorf("read_file inner-link/..: files %v, reason %q, %v; want sub listed", res.Files, res.Reason, err)
		}
		w, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "inner-link/../new.txt", Content: "new\n"})
		if err != nil || !w.Success {
			t.Fatalf("write_file inner-link/../new.txt: %+v, %v", w, err)
		}
		if _, err := os.Lstat(filepath.Join(fx.root, "new.txt")); !os.IsNotExist(err) {
			t.Errorf("write_file inner-link/../new.txt made new.txt in the root (%v)", err)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.root, "sub", "new.txt")); string(b) != "new\n" {
			t.Errorf("sub/new.txt holds %q; want the content written", b)
		}

		for _, p := range []string{"notes.txt/.", "good-link.txt/.", "sub/a.txt/."} {
			res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: p})
			if err != nil || res.Success || res.Reason != ReasonNotDirectory || res.Content != "" {
				t.Errorf("read_file %q: reason %q, content %q; want refused with %q", p, res.Reason, res.Content, ReasonNotDirectory)
			}
			w, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: p, Content: "overwritten\n"})
			if err != nil || w.Success || w.Reason != ReasonNotDirectory {
				t.Errorf("write_file %q: success %v, reason %q; want refused with %q", p, w.Success, w.Reason, ReasonNotDirectory)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(fx.root, "notes.txt")); string(b) != notesContent {
			t.Errorf("notes.txt now holds %q", b)
		}
		w, err = fx.ws.WriteFile(ctx, WriteFileInput{Path: "fresh.txt/.", Content: "x\n"})
		if err != nil || w.Success {
			t.Errorf("write_file fresh.txt/.: %+v, %v; want refused", w, err)
		}
		if _, err := os.Lstat(filepath.Join(fx.root, "fresh.txt")); !os.IsNotExist(err) {
			t.Errorf("write_file fresh.txt/. made fresh.txt (%v)", err)
		}
		// "sub/." is sub.
		res, err = fx.ws.ReadFile(ctx, ReadFileInput{Path: "sub/."})
		if err != nil || !res.Success {
			t.Errorf("read_file sub/.: %+v, %v; want sub listed", res, err)
		}
	})
}
