package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace"
)

// Workspace file tools against the plain os calls, in one run so the
// ratios compare like with like. Writes have two baselines: os.WriteFile
// (no fsync, not atomic) and the same atomic sequence workspace uses
// (temp file, fsync, rename, fsync directory) done with plain os calls.
func BenchmarkWorkspaceFiles(b *testing.B) {
	dir := b.TempDir()
	ws, err := workspace.New(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	ctx := context.Background()

	for _, size := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}} {
		content := strings.Repeat("x", size.n)
		name := "file-" + size.name + ".txt"
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}

		b.Run("read-"+size.name+"/workspace", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size.n))
			for b.Loop() {
				res, err := ws.ReadFile(ctx, workspace.ReadFileInput{Path: name})
				if err != nil || !res.Success || len(res.Content) != size.n {
					b.Fatalf("%v %+v", err, res.Error)
				}
			}
		})
		b.Run("read-"+size.name+"/os.ReadFile", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size.n))
			for b.Loop() {
				data, err := os.ReadFile(path)
				if err != nil || len(string(data)) != size.n {
					b.Fatal(err)
				}
			}
		})
		b.Run("write-"+size.name+"/workspace", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size.n))
			for b.Loop() {
				res, err := ws.WriteFile(ctx, workspace.WriteFileInput{Path: name, Content: content})
				if err != nil || !res.Success {
					b.Fatalf("%v %+v", err, res.Error)
				}
			}
		})
		b.Run("write-"+size.name+"/os.WriteFile", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size.n))
			for b.Loop() {
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("write-"+size.name+"/os-atomic-fsync", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size.n))
			for b.Loop() {
				if err := atomicWrite(path, content); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// atomicWrite is the durable-write baseline: what workspace.WriteFile
// does, without os.Root, path checks or link handling.
func atomicWrite(path, content string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".bench-*.tmp")
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// run_command "true" against a bare sh -c true.
func BenchmarkWorkspaceCommand(b *testing.B) {
	ws, err := workspace.New(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	ctx := context.Background()

	b.Run("true/workspace", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := ws.RunCommand(ctx, workspace.RunCommandInput{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
	b.Run("true/exec.Command", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
