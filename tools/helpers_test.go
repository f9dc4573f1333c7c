package tools_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts under testdata/")

// newRuntime starts a runtime that is closed at cleanup, after which no
// goroutine may be left.
func newRuntime(t *testing.T) *actors.Runtime { return actorstest.NewRuntime(t, nil) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, rt *actors.Runtime, spec actors.Spec) *actors.Conn {
	t.Helper()
	conn, err := rt.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// line renders a frame as one readable transcript line.
func line(f *messages.Frame) string { return messages.Format(f) }

func lines(frames []*messages.Frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = line(f)
	}
	return out
}

// transcript is a golden file made of titled sections of frames.
type transcript struct{ b strings.Builder }

func (tr *transcript) section(title string, frames []*messages.Frame) {
	fmt.Fprintf(&tr.b, "== %s\n", title)
	for _, l := range lines(frames) {
		tr.b.WriteString(l + "\n")
	}
}

// check compares the transcript with testdata/<name>.golden, or rewrites
// it with -update.
func (tr *transcript) check(t *testing.T, name string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got := tr.b.String()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (run with -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// recvN reads n frames.
func recvN(t *testing.T, conn *actors.Conn, n int) []*messages.Frame {
	t.Helper()
	ctx := testCtx(t)
	out := make([]*messages.Frame, 0, n)
	for range n {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d frames %q: %v", len(out), lines(out), err)
		}
		out = append(out, f)
	}
	return out
}

// sink collects the frames a scripted model receives, for the test
// goroutine to read.
type sink chan *messages.Frame

func newSink() sink { return make(sink, 1024) }

func (s sink) observe(f *messages.Frame) { s <- f }

// until reads frames until one matches stop (included).
func (s sink) until(t *testing.T, stop func(*messages.Frame) bool) []*messages.Frame {
	t.Helper()
	ctx := testCtx(t)
	var out []*messages.Frame
	for {
		select {
		case f := <-s:
			out = append(out, f)
			if stop(f) {
				return out
			}
		case <-ctx.Done():
			t.Fatalf("model sink: got %q, still waiting", lines(out))
		}
	}
}

// results reads frames until n TOOL_RESULTs have arrived and returns those.
func (s sink) results(t *testing.T, n int) []*messages.Frame {
	t.Helper()
	var res []*messages.Frame
	s.until(t, func(f *messages.Frame) bool {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			res = append(res, f)
		}
		return len(res) == n
	})
	return res
}
