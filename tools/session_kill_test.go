package tools_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// The process-kill test runs a resumable session in child processes (this
// test binary again, running TestSessionKillChild) on one bbolt file and
// SIGKILLs them at chosen points. The child says it reached a point by
// writing a marker line to file descriptor 3 and then blocks on its stdin,
// which the parent keeps open: no timing is involved.
const (
	killModeEnv  = "POLYWEAVE_SESSION_KILL_MODE" // mid-stream, mid-tool or finish
	killDirEnv   = "POLYWEAVE_SESSION_KILL_DIR"
	killSession  = "session-1"
	killFirstMsg = `[{"role":"user","content":"write the lines"}]`
)

// bigChunk is the size of the pieces the big arguments are streamed in;
// bigArgs(line) is a 1 MiB argument object, a whole number of pieces.
const bigChunk = 4 << 10

func bigArgs(line string) string {
	head := `{"line":"` + line + `","pad":"`
	size := 1 << 20
	return head + strings.Repeat("x", size-len(head)-2) + `"}`
}

func chunked(s string) []string {
	var out []string
	for len(s) > bigChunk {
		out, s = append(out, s[:bigChunk]), s[bigChunk:]
	}
	return append(out, s)
}

// sideLine is what append_line writes for its arguments: the line, the
// size and a hash of the arguments it got.
func sideLine(line string, args []byte) string {
	return fmt.Sprintf("%s %d %x\n", line, len(args), sha256.Sum256(args))
}

// killScript is the conversation: turn 0 streams c1 (append "one", with a
// 1 MiB argument); turn 1 makes three parallel calls: c2 (append "two",
// 1 MiB streamed), c3 streamed (append "three"), c4 (count lines,
// idempotent); turn 2 is the final answer. Turns are picked by
// conversation, so a resumed request gets the right one.
func killScript() scripted.Script {
	return scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Writing one.", ToolCalls: []scripted.ToolCall{
			{ID: "c1", Name: "append_line", Chunks: chunked(bigArgs("one"))},
		}},
		{ToolCalls: []scripted.ToolCall{
			{ID: "c2", Name: "append_line", Chunks: chunked(bigArgs("two"))},
			{ID: "c3", Name: "append_line", Chunks: []string{`{"line"`, `:"three"}`}},
			{ID: "c4", Name: "count_lines"},
		}},
		{Text: "All done."},
	}}
}

// TestSessionKillChild is the child's body; it does nothing unless started
// by TestSession_ProcessKill.
func TestSessionKillChild(t *testing.T) {
	tooltest.ChildBody(t, killModeEnv, killDirEnv, runKillChild)
}

// hookedStore signals the parent when the session reaches a state: it
// decodes each batch of events once it is stored.
type hookedStore struct {
	durability.Store
	decode  func([]byte) (proto.Message, error)
	onEvent func(proto.Message)
}

func (s hookedStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if err := s.Store.PersistEvents(ctx, name, first, data); err != nil {
		return err
	}
	for _, d := range data {
		if msg, err := s.decode(d); err == nil {
			s.onEvent(msg)
		}
	}
	return nil
}

func runKillChild(mode, dir string) error {
	marker := os.NewFile(3, "marker")
	mark := func(what string) {
		fmt.Fprintln(marker, what)
		io.Copy(io.Discard, os.Stdin) // blocks until the parent kills us
		os.Exit(3)                    // the parent went away without killing us
	}
	store, err := boltstore.Open(filepath.Join(dir, "session.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	prov, err := durability.NewProvider(store, nil)
	if err != nil {
		return err
	}
	c2Persisted := make(chan struct{})
	var once sync.Once
	c1Stored := 0 // bytes of c1's arguments stored; the loop's goroutine only
	hooked := hookedStore{Store: store, decode: prov.Decode, onEvent: func(e proto.Message) {
		switch e := e.(type) {
		case *messages.LoopArgs:
			if e.GetToolCallId() == "c1" {
				c1Stored += len(e.GetChunk())
				if mode == "mid-stream" && c1Stored >= 1<<19 {
					// Half of c1's arguments are stored; the loop waits
					// here, inside the store call, until the kill.
					mark(fmt.Sprintf("mid-stream %d", c1Stored))
				}
			}
		case *messages.LoopCallResult:
			if mode == "mid-tool" && e.GetResult().GetToolCallId() == "c2" {
				once.Do(func() { close(c2Persisted) })
			}
		}
	}}

	sideFile := filepath.Join(dir, "side.txt")
	appendLine, err := tools.New(tools.Definition{Name: "append_line", Timeout: tools.NoTimeout,
		Schema: json.RawMessage(`{"type":"object","properties":{"line":{"type":"string"}},"required":["line"]}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct{ Line string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			f, err := os.OpenFile(sideFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			if _, err := f.WriteString(sideLine(in.Line, args)); err != nil {
				f.Close()
				return nil, err
			}
			if err := errorsJoin(f.Sync(), f.Close()); err != nil {
				return nil, err
			}
			if mode == "mid-tool" && in.Line == "three" {
				<-c2Persisted // c2 has completed and its result is on disk
				mark("mid-tool")
			}
			return map[string]string{"appended": in.Line}, nil
		}})
	if err != nil {
		return err
	}
	countLines, err := tools.New(tools.Definition{Name: "count_lines", Idempotent: true, Timeout: tools.NoTimeout,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if mode == "mid-tool" {
				<-ctx.Done() // still running when the process dies
				return nil, ctx.Err()
			}
			b, err := os.ReadFile(sideFile)
			if err != nil {
				return nil, err
			}
			return map[string]int{"lines": bytes.Count(b, []byte("\n"))}, nil
		}})
	if err != nil {
		return err
	}

	model, err := scripted.New(killScript(), nil)
	if err != nil {
		return err
	}
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "loop", Tools: []*tools.Tool{appendLine, countLines}},
		// c1's 1 MiB is written in 64 KiB pieces: the kill finds half of it stored.
		Session: &tools.SessionOptions{ID: killSession, Store: hooked, BufferBytes: 64 << 10},
	})
	if err != nil {
		return err
	}
	frames, err := tooltest.AskLoop(loop, json.RawMessage(killFirstMsg), time.Minute)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for _, f := range frames {
		line := messages.Format(f)
		if len(line) > 300 { // the big calls
			line = line[:300] + "…"
		}
		out.WriteString(line + "\n")
	}
	last, err := tooltest.LastRequestMessages(model)
	if err != nil {
		return err
	}
	out.WriteString("== last request messages\n")
	out.Write(last)
	return os.WriteFile(filepath.Join(dir, "transcript.txt"), out.Bytes(), 0o644)
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// startKillChild starts the child in mode and, unless mode is "finish",
// waits for its marker and SIGKILLs it. It returns what the marker says
// after the mode.
func startKillChild(t *testing.T, dir, mode string) string {
	t.Helper()
	c := tooltest.StartChild(t, "^TestSessionKillChild$", killModeEnv+"="+mode, killDirEnv+"="+dir)
	if mode == "finish" {
		c.Wait(t)
		return ""
	}
	what, rest, _ := strings.Cut(c.Mark(t), " ")
	if what != mode {
		c.Kill(t)
		t.Fatalf("child %s: marker %q", mode, what)
	}
	c.Kill(t)
	return rest
}

// readSide returns the side file's lines, sorted (parallel calls append
// in any order), one per line.
func readSide(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "side.txt"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// TestSession_ProcessKill kills a session while a 1 MiB argument is
// being streamed, restarts it, kills it mid-tool-execution (after another
// 1 MiB streamed call ran), restarts it again, and checks the outcome:
// the side-effecting tool ran exactly once per call that completed or was
// running, and got its 1 MiB arguments byte for byte; the call killed
// mid-stream went back to the model with exactly the argument bytes
// stored before the kill (whole chunks: none lost, none twice);
// interrupted calls got the interrupted result, the idempotent call ran
// again, and the final answer was reached.
func TestSession_ProcessKill(t *testing.T) {
	dir := t.TempDir()
	wantSide := sideLine("three", []byte(`{"line":"three"}`)) + sideLine("two", []byte(bigArgs("two")))

	stored, err := strconv.Atoi(startKillChild(t, dir, "mid-stream"))
	if err != nil {
		t.Fatalf("mid-stream marker: %v", err)
	}
	if side := readSide(t, dir); side != "" {
		t.Fatalf("after the mid-stream kill the side file holds %q; c1 must not have run", side)
	}
	if stored%bigChunk != 0 || stored >= len(bigArgs("one")) {
		t.Fatalf("%d bytes of c1's arguments stored: not a whole number of %d-byte chunks short of the end", stored, bigChunk)
	}
	startKillChild(t, dir, "mid-tool")
	if side := readSide(t, dir); side != wantSide {
		t.Fatalf("after the mid-tool kill the side file holds %q, want %q", side, wantSide)
	}
	startKillChild(t, dir, "finish")
	if side := readSide(t, dir); side != wantSide {
		t.Errorf("at the end the side file holds %q: a completed or interrupted call ran again", side)
	}

	b, err := os.ReadFile(filepath.Join(dir, "transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	frames, lastReq, _ := strings.Cut(string(b), "== last request messages\n")
	t.Logf("last run:\n%s", frames)
	var msgs []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal([]byte(lastReq), &msgs); err != nil {
		t.Fatalf("last request: %v\n%s", err, lastReq)
	}
	results := map[string][]string{}
	args := map[string][]string{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			args[tc.ID] = append(args[tc.ID], tc.Function.Arguments)
		}
		if m.Role == "tool" {
			results[m.ToolCallID] = append(results[m.ToolCallID], *m.Content)
		}
	}
	if got := args["c1"]; len(got) != 1 || got[0] != bigArgs("one")[:stored] {
		t.Errorf("c1 went back to the model with %d argument strings, want one of the %d bytes stored before the kill",
			len(got), stored)
	}
	if got := args["c2"]; len(got) != 1 || got[0] != bigArgs("two") {
		t.Errorf("c2 went back to the model without its exact 1 MiB arguments")
	}
	for id, want := range map[string]string{
		"c1": string(tools.FailureInterrupted), // killed while streaming
		"c2": `{"appended":"two"}`,             // completed before the kill: reused
		"c3": string(tools.FailureInterrupted), // killed while running: not run again
		"c4": `{"lines":2}`,                    // idempotent: run again
	} {
		got := results[id]
		if len(got) != 1 {
			t.Errorf("%s has %d results in the conversation, want 1: %q", id, len(got), got)
			continue
		}
		if want == string(tools.FailureInterrupted) {
			if !strings.Contains(got[0], "interrupted") || !strings.Contains(got[0], `"success":false`) {
				t.Errorf("%s result %s, want an interrupted error", id, got[0])
			}
		} else if got[0] != want {
			t.Errorf("%s result %s, want %s", id, got[0], want)
		}
	}
	for _, want := range []string{
		`META stream=main name=session payload={"event":"resumed","session_id":"session-1","iteration":1,"reused":["c2"],"rerun":["c4"],"interrupted":["c3"]}`,
		`TEXT stream=main text="All done."`,
	} {
		if !strings.Contains(frames, want) {
			t.Errorf("last run's frames lack %s", want)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(frames), "END stream=main") {
		t.Errorf("last run did not end with END")
	}
}
