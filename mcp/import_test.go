package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// importSelf imports the tools of the test binary run as a stdio server.
func importSelf(t *testing.T, rt *actors.Runtime, opts *mcp.ImportOptions) *mcp.Imported {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var o mcp.ImportOptions
	if opts != nil {
		o = *opts
	}
	o.Command = []string{exe, "-test.run=^$"}
	o.Env = append(o.Env, serverEnv+"=1")
	return imported(t, rt, &o)
}

// runLoop runs a tool loop over a scripted model with the given tools and
// returns the TOOL_RESULT frames by call id.
func runLoop(t *testing.T, rt *actors.Runtime, ts []*tools.Tool, turns ...scripted.Turn) map[string]*messages.Frame {
	t.Helper()
	model := scripted.MustNew(scripted.Script{Turns: turns}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: ts}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rt.Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.SendAll(messages.RawParam("s1", "messages", json.RawMessage(`[{"role":"user","content":"go"}]`)), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]*messages.Frame{}
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			if results[f.GetToolCallId()] != nil {
				t.Errorf("call %s answered twice: %s, then %s", f.GetToolCallId(), results[f.GetToolCallId()].GetPayload(), f.GetPayload())
			}
			results[f.GetToolCallId()] = f
		case messages.FrameType_ERROR:
			t.Fatalf("loop failed: %s", f.GetText())
		}
	}
	return results
}

func pidOf(t *testing.T, f *messages.Frame) int {
	t.Helper()
	var v struct{ PID int }
	if f == nil || f.IsErrorResult() || json.Unmarshal(f.GetPayload(), &v) != nil || v.PID == 0 {
		t.Fatalf("pid result: %v", f)
	}
	return v.PID
}

// killPID kills the process pid at once (SIGKILL on Unix systems).
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

func waitFile(t *testing.T, file, want string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil && string(b) == want {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s never held %q", file, want)
		}
	}
}

func TestImport_ToolsFromStdioServer(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	im := importSelf(t, rt, &mcp.ImportOptions{Prefix: "t."})
	var names []string
	for _, tl := range im.Tools() {
		names = append(names, tl.Name())
	}
	if strings.Join(names, ",") != "t_add,t_block,t_pid" {
		t.Fatalf("imported %v", names)
	}
	add := im.Tools()[0].Description()
	if !add.Idempotent || add.Description != "Adds two integers" || !strings.Contains(string(add.Schema), `"b"`) {
		t.Errorf("add described as %+v", add)
	}
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "ok", Name: "t_add", Arguments: `{"a":2,"b":40}`},
			{ID: "bad", Name: "t_add", Arguments: `{"a":"two","b":40}`},
		}},
		scripted.Turn{Text: "done"})
	if f := res["ok"]; f == nil || f.IsErrorResult() || string(f.GetPayload()) != `"42"` {
		t.Errorf("add: %v", f)
	}
	if f := res["bad"]; f == nil || tools.KindOf(f) != tools.FailureInvalidArguments {
		t.Errorf("invalid arguments were not refused before the call: %v", f)
	}
}

func TestImport_ServerKilledMidCallIsRestarted(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	im := importSelf(t, rt, nil)
	marker := filepath.Join(t.TempDir(), "block")
	args, _ := json.Marshal(map[string]string{"file": marker})

	// Learn the server's pid; then block, killing the server once the
	// call has reached it; then ask for the pid again.
	res := runLoop(t, rt, im.Tools(), scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "pid1", Name: "pid"}}},
		scripted.Turn{Text: "noted"})
	pid1 := pidOf(t, res["pid1"])
	killed := make(chan error, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(30 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				killed <- killPID(pid1)
				return
			}
			select {
			case <-tick.C:
			case <-deadline:
				killed <- errors.New("the block call never reached the server")
				return
			}
		}
	}()
	res = runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "block", Name: "block", Arguments: string(args)}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "pid2", Name: "pid"}}},
		scripted.Turn{Text: "done"})
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if f := res["block"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "MCP server") {
		t.Fatalf("killed call: %v", f)
	}
	t.Logf("killed call: %s", res["block"].GetPayload())
	if pid2 := pidOf(t, res["pid2"]); pid2 == pid1 {
		t.Fatalf("call after the kill ran on the killed server %d", pid1)
	}
	if n := im.Connections(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

func TestImport_TimeoutCancelsOnServer(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	im := importSelf(t, rt, &mcp.ImportOptions{CallTimeout: 300 * time.Millisecond})
	marker := filepath.Join(t.TempDir(), "block")
	args, _ := json.Marshal(map[string]string{"file": marker})
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "block", Name: "block", Arguments: string(args)}}},
		scripted.Turn{Text: "done"})
	if f := res["block"]; f == nil || tools.KindOf(f) != tools.FailureTimeout {
		t.Fatalf("hung call: %v", f)
	}
	// The server saw notifications/cancelled: its handler was cancelled.
	waitFile(t, marker, "cancelled")
}

func TestImport_Errors(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	for _, o := range []*mcp.ImportOptions{nil, {Command: []string{""}}, {Command: []string{"x"}, URL: "http://127.0.0.1:1/mcp"}} {
		if _, err := mcp.Import(context.Background(), rt, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	_, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{Command: []string{"/nonexistent/server"}, ConnectTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("a server that cannot start was imported")
	}
}

// A server that cannot start is reported at once with the first
// connection's error (not after the restarts a running server gets), and
// what it said on stderr reaches ImportOptions.Stderr.
func TestImport_ServerThatCannotStart(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var stderr lockedBuffer
	_, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{
		Command: []string{"sh", "-c", "echo 'no config file' >&2; exit 3"}, Stderr: &stderr})
	if err == nil || strings.Contains(err.Error(), "given up") || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("import of a server that exits at once: %v", err)
	}
	waitFor(t, "the server's stderr", func() bool { return strings.Contains(stderr.String(), "no config file") })
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// scriptedCall is a script that makes one call and then answers.
func scriptedCall(id, name, args string) []scripted.Turn {
	return []scripted.Turn{{ToolCalls: []scripted.ToolCall{{ID: id, Name: name, Arguments: args}}}, {Text: "done"}}
}
