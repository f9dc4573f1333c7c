package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace"
)

// Figure 6: the workspace file and command tools against the plain os
// calls. Writes have two baselines: os.WriteFile (no fsync, not atomic)
// and the same atomic sequence the workspace uses (temp file, fsync,
// rename, fsync directory) done with plain os calls.

// wsFixture is a workspace with one file per size, shared by the bodies.
type wsFixture struct {
	dir string
	ws  *workspace.Workspace
}

func newWSFixture(dir string, sizes []int) (*wsFixture, error) {
	ws, err := workspace.New(dir, nil)
	if err != nil {
		return nil, err
	}
	fx := &wsFixture{dir: dir, ws: ws}
	for _, n := range sizes {
		if err := os.WriteFile(fx.path(n), []byte(wsContent(n)), 0o644); err != nil {
			ws.Close()
			return nil, err
		}
	}
	return fx, nil
}

func (fx *wsFixture) Close() error { return fx.ws.Close() }

func wsName(n int) string               { return "file-" + sizeName(n) + ".txt" }
func (fx *wsFixture) path(n int) string { return filepath.Join(fx.dir, wsName(n)) }
func wsContent(n int) string            { return strings.Repeat("x", n) }

func (fx *wsFixture) benchRead(b *testing.B, n int) {
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		res, err := fx.ws.ReadFile(ctx, workspace.ReadFileInput{Path: wsName(n)})
		if err != nil || !res.Success || len(res.Content) != n {
			b.Fatalf("%v %+v", err, res.Error)
		}
	}
}

// benchOSRead converts to a string as the workspace result does.
func (fx *wsFixture) benchOSRead(b *testing.B, n int) {
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		data, err := os.ReadFile(fx.path(n))
		if err != nil || len(string(data)) != n {
			b.Fatal(err)
		}
	}
}

func (fx *wsFixture) benchWrite(b *testing.B, n int) {
	ctx := context.Background()
	content := wsContent(n)
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		res, err := fx.ws.WriteFile(ctx, workspace.WriteFileInput{Path: wsName(n), Content: content})
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res.Error)
		}
	}
}

func (fx *wsFixture) benchOSWrite(b *testing.B, n int) {
	content := wsContent(n)
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		if err := os.WriteFile(fx.path(n), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func (fx *wsFixture) benchAtomicWrite(b *testing.B, n int) {
	content := wsContent(n)
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		if err := atomicWrite(fx.path(n), content); err != nil {
			b.Fatal(err)
		}
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

// benchRunTrue is run_command "true".
func (fx *wsFixture) benchRunTrue(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := fx.ws.RunCommand(ctx, workspace.RunCommandInput{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// benchExecTrue is a bare sh -c true.
func benchExecTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// sizeName is 4KiB, 1MiB...
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
