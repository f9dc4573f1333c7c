package workspace

import (
	"context"
	"os/exec"
	"testing"
)

// BenchmarkRunCommand is run_command "true" against a bare
// exec.Command("sh", "-c", "true").Run(), unsandboxed and sandboxed. The
// sandboxed "ready" case waits, off the clock, for the sandbox prepared
// ahead before each call (a workspace idle between calls, as it is
// while a model thinks); "back-to-back" calls without pause, so each
// also waits for its sandbox's set-up. Compare the ns/op of one run.
func BenchmarkRunCommand(b *testing.B) {
	b.Run("exec-sh-c-true", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run := func(b *testing.B, ws *Workspace, ready bool) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if ready {
				b.StopTimer()
				mustDo(b, ws.Warm(ctx))
				b.StartTimer()
			}
			res, err := ws.RunCommand(ctx, RunCommandInput{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%v %+v", err, res)
			}
		}
	}
	off, err := New(b.TempDir(), &Options{Sandbox: SandboxOff})
	mustDo(b, err)
	defer off.Close()
	b.Run("unsandboxed", func(b *testing.B) { run(b, off, false) })
	on, err := New(b.TempDir(), nil)
	mustDo(b, err)
	defer on.Close()
	if !on.Protections().Sandbox {
		b.Logf("no sandbox here: %s", on.Protections())
		return
	}
	b.Run("sandboxed-ready", func(b *testing.B) { run(b, on, true) })
	b.Run("sandboxed-back-to-back", func(b *testing.B) { run(b, on, false) })
}
