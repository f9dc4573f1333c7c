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
	"github.com/polyweave/polyweave-go/workspace/sandbox"
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

// Figure 6's command rows: run_command true sandboxed and unsandboxed
// against a bare sh -c true, then what the sandbox's parts cost: the
// sandbox without Landlock against the whole, and a bare exec of true in
// each namespace alone against a bare exec of true.

// newCommandWorkspace opens a workspace on a fresh directory under dir
// with the given options; the sandboxed ones require the full sandbox,
// so a row never measures less than it says.
func newCommandWorkspace(dir, name string, opts *workspace.Options) (*workspace.Workspace, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	return workspace.New(d, opts)
}

// benchRun is run_command "true" on ws. With ready, each call first
// waits, off the clock, until the sandbox prepared for it is set up and
// the previous command's helper is gone: the call on a workspace that
// was idle between commands, as it is while a model thinks.
func benchRun(ws *workspace.Workspace, ready bool) func(b *testing.B) {
	return func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if ready {
				b.StopTimer()
				if err := ws.Warm(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			res, err := ws.RunCommand(ctx, workspace.RunCommandInput{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%v %+v", err, res)
			}
		}
	}
}

// commandPairs are figure 6's command rows; close releases their
// workspaces.
func commandPairs(dir string) (pairs []pair, close func(), err error) {
	var opened []*workspace.Workspace
	close = func() {
		for _, ws := range opened {
			ws.Close()
		}
	}
	open := func(name string, opts *workspace.Options) *workspace.Workspace {
		if err != nil {
			return nil
		}
		var ws *workspace.Workspace
		ws, err = newCommandWorkspace(dir, name, opts)
		if err == nil {
			opened = append(opened, ws)
		}
		return ws
	}
	sandboxed := open("sandboxed", &workspace.Options{Sandbox: workspace.SandboxRequired})
	unsandboxed := open("unsandboxed", &workspace.Options{Sandbox: workspace.SandboxOff})
	if err != nil {
		close()
		return nil, nil, err
	}
	bare := benchSide("exec sh -c true", benchExecTrue)
	pairs = append(pairs,
		pair{figure: "6", name: "run_command true, sandboxed, sandbox ready",
			ours: benchSide("workspace", benchRun(sandboxed, true)), base: bare,
			kind: duration, unit: "op", goal: ratioAtMost(2),
			note: "sandboxed, on a workspace idle between calls: the call hands its command to the sandbox prepared after the previous one (6 namespaces, mounts, Landlock, rlimits) and answers once everything in it is dead"},
		pair{figure: "6", name: "run_command true, sandboxed, back to back",
			ours: benchSide("workspace", benchRun(sandboxed, false)), base: bare,
			kind: duration, unit: "op", goal: info,
			note: "sandboxed, calls without pause: each also waits for its sandbox's set-up (the helper, this binary re-executed) and competes with the previous one's teardown"},
		pair{figure: "6", name: "run_command true, unsandboxed",
			ours: benchSide("workspace", benchRun(unsandboxed, false)), base: bare,
			kind: duration, unit: "op", goal: ratioAtMost(1.2)},
	)
	if sandbox.Supported {
		withLL := benchSide("sandbox", benchSandboxTrue(sandboxed.Dir(), false))
		withoutLL := benchSide("sandbox without Landlock", benchSandboxTrue(sandboxed.Dir(), true))
		pairs = append(pairs, pair{figure: "6", name: "sandboxed true: Landlock's share",
			ours: withLL, base: withoutLL, kind: duration, unit: "op", goal: info,
			note: "the sandbox package alone (no workspace), with and without Landlock"})
	}
	pairs = append(pairs, namespacePairs()...)
	return pairs, close, nil
}

// benchSandboxTrue runs true in the sandbox package's sandbox directly.
func benchSandboxTrue(dir string, withoutLandlock bool) func(b *testing.B) {
	return func(b *testing.B) {
		cfg, err := sandbox.Config{WithoutLandlock: withoutLandlock}.WithDefaults()
		if err != nil {
			b.Fatal(err)
		}
		root, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer root.Close()
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer null.Close()
		b.ReportAllocs()
		for b.Loop() {
			p, err := sandbox.Start(cfg, root, "/bin/sh", "true", nil, null, null)
			if err != nil {
				b.Fatal(err)
			}
			_ = p.Cmd.Wait()
			if exit, err := p.Finish(); err != nil || exit.Code != 0 {
				b.Fatalf("%+v %v", exit, err)
			}
		}
	}
}
