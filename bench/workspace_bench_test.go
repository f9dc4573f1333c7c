package main

import (
	"testing"

	"github.com/polyweave/polyweave-go/workspace"
)

// BenchmarkWorkspaceFiles reads and writes 4 KiB and 1 MiB files through
// the workspace against os.ReadFile, os.WriteFile and an atomic fsynced
// write done with plain os calls, in one run so the ratios compare like
// with like.
func BenchmarkWorkspaceFiles(b *testing.B) {
	sizes := []int{4 << 10, 1 << 20}
	fx, err := newWSFixture(b.TempDir(), sizes)
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	for _, n := range sizes {
		b.Run("read-"+sizeName(n)+"/workspace", func(b *testing.B) { fx.benchRead(b, n) })
		b.Run("read-"+sizeName(n)+"/os.ReadFile", func(b *testing.B) { fx.benchOSRead(b, n) })
		b.Run("write-"+sizeName(n)+"/workspace", func(b *testing.B) { fx.benchWrite(b, n) })
		b.Run("write-"+sizeName(n)+"/os.WriteFile", func(b *testing.B) { fx.benchOSWrite(b, n) })
		b.Run("write-"+sizeName(n)+"/os-atomic-fsync", func(b *testing.B) { fx.benchAtomicWrite(b, n) })
	}
}

// BenchmarkWorkspaceCommand is run_command "true" against a bare
// exec.Command("sh", "-c", "true").Run().
func BenchmarkWorkspaceCommand(b *testing.B) {
	fx, err := newWSFixture(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer fx.Close()
	b.Run("true/workspace", fx.benchRunTrue)
	b.Run("true/exec.Command", benchExecTrue)
	for _, mode := range []struct {
		name string
		mode workspace.SandboxMode
	}{{"sandboxed", workspace.SandboxRequired}, {"unsandboxed", workspace.SandboxOff}} {
		ws, err := newCommandWorkspace(b.TempDir(), mode.name, &workspace.Options{Sandbox: mode.mode})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("true/workspace-"+mode.name, benchRun(ws, false))
		if mode.mode == workspace.SandboxRequired {
			b.Run("true/workspace-sandboxed-ready", benchRun(ws, true))
		}
		ws.Close()
	}
}
