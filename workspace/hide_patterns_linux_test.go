//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A command's "mkfifo app" beside a HidePaths pattern ".../*/*.env"
// does not make the next commands' set-ups wait for a writer on the
// FIFO: they run, and Close returns.
func TestSandbox_HidePatternFIFOComponent(t *testing.T) {
	requireFullSandbox(t)
	dir := dirOutsideTmp(t)
	fifo := filepath.Join(dir, "app")
	ws, err := New(dir, &Options{HidePaths: []string{filepath.Join(dir, "*", "*.env")}})
	mustDo(t, err)
	closed := make(chan struct{})
	defer func() {
		go func() { ws.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Errorf("Close does not return")
			for { // only once the test failed: let the stuck set-ups go on
				if f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				select {
				case <-closed:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	if res := runIn(t, ws, "mkfifo app && echo made"); res.Stdout != "made\n" {
		t.Fatalf("mkfifo: %+v", res)
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := ws.RunCommand(ctx, RunCommandInput{Command: "echo ran"})
		cancel()
		if err != nil || r.Stdout != "ran\n" {
			t.Errorf("command %d after mkfifo: %q, %q, %v", i, r.Stdout, r.Error, err)
		}
	}
}
