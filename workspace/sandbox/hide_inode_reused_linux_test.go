//go:build linux

package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A file made at a hidden path after the one resolved there was removed
// is another file, though the file system may give it the same inode
// number (ext4 gives a freed number to the next file made): a sandbox is
// refused ([ErrHiddenMoved]), its birth telling them apart.
func TestHiddenFileWithTheNumberOfOneGoneRefused(t *testing.T) {
	dir := workspaceOutsideTmp(t)
	key := filepath.Join(dir, "key.txt")
	writeSaying(t, dir, "key.txt", "OLD-KEY")
	cfg := resolvedConfig(t, dir, key)
	want := cfg.Resolved[0]
	if want.Birth == 0 {
		t.Skipf("the file system of %s does not give files their birth time: device and inode alone tell", dir)
	}
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	// Files are made beside it until one takes its number, then put in
	// its place.
	reused := false
	for i := 0; i < 100 && !reused; i++ {
		p := filepath.Join(dir, "new.txt")
		writeSaying(t, dir, "new.txt", "NEW-KEY")
		dev, ino := fileIDOf(t, p)
		if reused = dev == want.Dev && ino == want.Ino; reused {
			if err := os.Rename(p, key); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Rename(p, filepath.Join(dir, "other"+string(rune('a'+i%26))+".txt")); err != nil {
			t.Fatal(err)
		}
	}
	if !reused {
		t.Fatalf("no file made in %s took the inode number %d of the one removed", dir, want.Ino)
	}
	root, null := openRootAndNull(t, dir)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Start(cfg, root, "/bin/sh", "echo ran", nil, outW, null)
	outW.Close()
	if err == nil {
		_, _ = p.Finish()
		b, _ := io.ReadAll(outR)
		t.Fatalf("a command ran with another file at the hidden path, which took the inode number of the one resolved (it printed %q)", b)
	}
	if !errors.Is(err, ErrHiddenMoved) {
		t.Errorf("the refusal does not say why (errors.Is ErrHiddenMoved): %v", err)
	}
}

// fileIDOf is the device and inode of the file at path.
func fileIDOf(t *testing.T, path string) (dev, ino uint64) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileID(fi)
}
