//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// A workspace nested in another (B = a/sub inside A = a) must never get
// anything but its own directory, whatever A's commands do to the names
// on the way to it meanwhile. Here a goroutine stands in for A's
// command: it swaps a/sub with a/sub.lnk, a link to "/", as fast as it
// can, while B runs its commands. A sandbox set up by the workspace's
// path rather than by its descriptor picks the host's root up now and
// then, writable; every command here must either run in B's own
// directory or be refused before it runs.
func TestNestedWorkspaceRenameRace(t *testing.T) {
	// The old, by-path set-up lost the race in about one run in 15: 100
	// runs miss it about once in 500 (fewer under the race detector,
	// where the plain run is the check).
	runs := 100
	if raceDetector {
		runs = 30
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	b := filepath.Join(a, "sub")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "inside"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(a, "sub.lnk")); err != nil {
		t.Fatal(err)
	}
	// A marker outside both workspaces: a command that sees it through
	// its working directory was given the host's root.
	marker := filepath.Join(dir, "host-marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	root, null := openRootAndNull(t, b)
	cfg := defaults(t, Config{})

	// The swapping runs while a sandbox is set up (when the race is), and
	// pauses while its command runs: on: one token per set-up.
	on, off := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var swaps atomic.Int64
	aFD, err := unix.Open(a, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(aFD)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range on {
		swapping:
			for {
				select {
				case <-off:
					break swapping
				default:
				}
				if err := unix.Renameat2(aFD, "sub", aFD, "sub.lnk", unix.RENAME_EXCHANGE); err != nil {
					t.Error(err)
					<-off
					break
				}
				swaps.Add(1)
			}
			if swaps.Load()%2 == 1 { // put the names back
				_ = unix.Renameat2(aFD, "sub", aFD, "sub.lnk", unix.RENAME_EXCHANGE)
				swaps.Add(1)
			}
		}
	}()
	defer func() { close(on); wg.Wait() }()

	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	defer outW.Close()
	var ran, refused, escaped int
	var firstRefusal string
	// The command says where it is: in B ("in"), in the host's root
	// ("ESCAPED"), or elsewhere ("lost").
	cmd := `if test -e .` + marker + `; then echo ESCAPED; elif test -e inside; then echo in; else echo lost; fi`
	for range runs {
		on <- struct{}{}
		p, err := Prepare(cfg, root, outW, null)
		off <- struct{}{}
		if err != nil {
			refused++
			if firstRefusal == "" {
				firstRefusal = err.Error()
			}
			continue
		}
		if err := p.Run("/bin/sh", cmd, nil); err != nil {
			p.Release()
			t.Fatal(err)
		}
		exit, err := p.Finish()
		_ = p.Cmd.Wait()
		if err != nil || exit.Code != 0 {
			t.Fatalf("exit %+v, %v", exit, err)
		}
		var line [64]byte
		n, err := outR.Read(line[:])
		if err != nil {
			t.Fatal(err)
		}
		switch got := strings.TrimSpace(string(line[:n])); got {
		case "in":
			ran++
		case "ESCAPED":
			escaped++
		default:
			t.Errorf("the command ran elsewhere than in its workspace: %q", got)
		}
	}
	t.Logf("%d runs: %d in the workspace, %d refused (first: %s), %d with the host's root; %d swaps",
		runs, ran, refused, firstRefusal, escaped, swaps.Load())
	if escaped > 0 {
		t.Errorf("%d of %d commands ran with the host's root as their workspace", escaped, runs)
	}
	if ran == 0 {
		t.Error("no command ran in its workspace: the test proves nothing")
	}
}
