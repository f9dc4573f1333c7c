package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A ".." after a name that is not a directory resolves nowhere: the
// kernel answers ENOTDIR ("notes.txt/.."), or ENOENT for a name that does
// not exist ("missing/.."). The file tools answer as the kernel would and
// never act on the name the path reads as once cleaned: the root, a
// sibling file, a new file beside the one named. A ".." after a
// directory (a link to one included) is resolved, within the root.
func TestFileTools_DotDotAfterANonDirectory(t *testing.T) {
	fx := newFixture(t, nil)
	ctx := context.Background()
	reads := []struct {
		path string
		want Reason
	}{
		{"notes.txt/..", ReasonNotDirectory},
		{"notes.txt/../notes.txt", ReasonNotDirectory},
		{"notes.txt/./../sub/a.txt", ReasonNotDirectory},
		{"sub/a.txt/../a.txt", ReasonNotDirectory},
		{"good-link.txt/../notes.txt", ReasonNotDirectory},
		{"missing/../notes.txt", ReasonNotFound},
		{"missing/..", ReasonNotFound},
		{"sub/../notes.txt/../sub/a.txt", ReasonNotDirectory},
		{"up/../notes.txt", ReasonEscapes},
		{"self/../ws/notes.txt", ReasonEscapes}, // self links to the root: its ".." is the root's parent
	}
	for _, c := range reads {
		res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: c.path})
		if err != nil {
			t.Fatal(err)
		}
		if res.Reason != c.want || res.Content != "" || res.Success {
			t.Errorf("read_file %q: reason %q, content %q, files %v; want refused with %q", c.path, res.Reason, res.Content, res.Files, c.want)
		}
	}
	writes := []struct {
		path, lands string
		want        Reason
	}{
		{"notes.txt/../new.txt", "new.txt", ReasonNotDirectory},
		{"notes.txt/../notes.txt", "", ReasonNotDirectory},
		{"missing/../new.txt", "new.txt", ReasonNotFound},
		{"sub/a.txt/../b.txt", "sub/b.txt", ReasonNotDirectory},
	}
	for _, c := range writes {
		res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: c.path, Content: "overwritten\n"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Success || res.Reason != c.want {
			t.Errorf("write_file %q: success %v, reason %q; want refused with %q", c.path, res.Success, res.Reason, c.want)
		}
		if c.lands != "" {
			if _, err := os.Lstat(filepath.Join(fx.root, c.lands)); !os.IsNotExist(err) {
				t.Errorf("write_file %q made %s (%v)", c.path, c.lands, err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(fx.root, "notes.txt")); string(b) != notesContent {
		t.Errorf("notes.txt now holds %q", b)
	}
	// After a directory, ".." is resolved as the kernel does.
	res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "sub/../notes.txt"})
	if err != nil || res.Content != notesContent {
		t.Errorf("read_file sub/../notes.txt: %+v, %v; want notes.txt", res, err)
	}
}
