package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadFile reads a small file by a plain name, the common case,
// and by names with "." and ".." that are resolved before the read.
func BenchmarkReadFile(b *testing.B) {
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sub", "deep"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "notes.txt"), []byte("hello notes\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	ws, err := New(root, &Options{AllowedExtensions: []string{".txt"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	ctx := context.Background()
	for _, path := range []string{"sub/notes.txt", "./sub/notes.txt", "sub/deep/../notes.txt"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				res, err := ws.ReadFile(ctx, ReadFileInput{Path: path})
				if err != nil || !res.Success {
					b.Fatalf("read_file %s: %+v, %v", path, res, err)
				}
			}
		})
	}
}
