package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// workspaces holds the workspace testTools made for a test until the
// cleanup of the server that serves its tools (serveOn) closes it. The
// runtime's leak check (actorstest.NewRuntime), made after the workspace,
// runs before the workspace's own cleanup; a workspace still open then
// may be preparing the sandbox of its next command, in a goroutine the
// check reports (it did, under load, after a run_command was cancelled).
var workspaces sync.Map // *testing.T → *workspace.Workspace

// testTools are the workspace tools of a fresh folder plus tools that
// fail in each way a tool can.
func testTools(t *testing.T) (string, []*tools.Tool) {
	t.Helper()
	dir := t.TempDir()
	ws, err := workspace.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	workspaces.Store(t, ws)
	t.Cleanup(func() {
		workspaces.Delete(t)
		ws.Close()
	})
	wsTools, err := workspace.Tools(ws)
	if err != nil {
		t.Fatal(err)
	}
	var panics atomic.Int32
	type echoIn struct {
		N int `json:"n"`
	}
	extra := []*tools.Tool{
		tools.MustNewTyped(tools.Definition{Name: "echo", Description: "Echoes n", Idempotent: true},
			func(_ context.Context, in echoIn) (map[string]int, error) { return map[string]int{"n": in.N}, nil }),
		tools.MustNew(tools.Definition{Name: "fail", Handler: func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("it broke")
		}}),
		tools.MustNew(tools.Definition{Name: "panic_once", Handler: func(context.Context, json.RawMessage) (any, error) {
			if panics.Add(1) == 1 {
				panic("first call panics")
			}
			return "recovered", nil
		}}),
		tools.MustNew(tools.Definition{Name: "slow", Timeout: 50 * time.Millisecond, Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}),
	}
	return dir, append(wsTools, extra...)
}

// serve starts a server for ts and connects a go-sdk client to it over
// the in-memory transport.
func serve(t *testing.T, ts []*tools.Tool, opts *mcp.ServerOptions, copts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return serveOn(t, actorstest.NewRuntime(t, nil), ts, opts, copts)
}

// serveOn is serve on rt; the session and the server are closed before
// what the test registered for cleanup earlier.
func serveOn(t *testing.T, rt *actors.Runtime, ts []*tools.Tool, opts *mcp.ServerOptions, copts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	var o mcp.ServerOptions
	if opts != nil {
		o = *opts
	}
	o.Tools = ts
	srv, err := mcp.NewServer(rt, &o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := sdk.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-served
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if ws, ok := workspaces.LoadAndDelete(t); ok {
			ws.(*workspace.Workspace).Close()
		}
	})
	return cs
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(r *sdk.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestServer_ListsToolsWithAnnotations(t *testing.T) {
	_, ts := testTools(t)
	cs := serve(t, ts, nil, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	if len(byName) != len(ts) {
		t.Fatalf("listed %d tools, want %d", len(byName), len(ts))
	}
	read, write, run := byName[workspace.ReadFileToolName], byName[workspace.WriteFileToolName], byName[workspace.RunCommandToolName]
	if read == nil || write == nil || run == nil {
		t.Fatalf("workspace tools missing: %v", byName)
	}
	if !read.Annotations.ReadOnlyHint || !read.Annotations.IdempotentHint || read.Annotations.DestructiveHint != nil {
		t.Errorf("read_file annotations %+v: want read-only, idempotent", read.Annotations)
	}
	if write.Annotations.ReadOnlyHint || write.Annotations.DestructiveHint == nil || *write.Annotations.DestructiveHint {
		t.Errorf("write_file annotations %+v: want not read-only, not destructive (reversible)", write.Annotations)
	}
	if run.Annotations.ReadOnlyHint || run.Annotations.DestructiveHint == nil || !*run.Annotations.DestructiveHint || run.Annotations.IdempotentHint {
		t.Errorf("run_command annotations %+v: want destructive, not idempotent", run.Annotations)
	}
	if read.Description != workspace.ReadFileDescription {
		t.Errorf("read_file description %q", read.Description)
	}
	schema, _ := json.Marshal(write.InputSchema)
	if !strings.Contains(string(schema), `"content"`) || !strings.Contains(string(schema), `"path"`) {
		t.Errorf("write_file input schema %s", schema)
	}
}

func TestServer_CallsWorkspaceTools(t *testing.T) {
	dir, ts := testTools(t)
	cs := serve(t, ts, nil, nil)

	res := callTool(t, cs, "write_file", map[string]any{"path": "a/b.txt", "content": "hello\n"})
	if res.IsError {
		t.Fatalf("write_file: %s", text(res))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("file written: %q, %v", b, err)
	}
	res = callTool(t, cs, "read_file", map[string]any{"path": "a/b.txt"})
	var got struct {
		Success bool   `json:"success"`
		Content string `json:"content"`
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(sc, &got); err != nil || res.IsError || !got.Success || got.Content != "hello\n" {
		t.Fatalf("read_file: error=%v structured=%s text=%s", res.IsError, sc, text(res))
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || fromText["content"] != "hello\n" {
		t.Errorf("text %s is not the structured content %s", text(res), sc)
	}
	res = callTool(t, cs, "run_command", map[string]any{"command": "cat a/b.txt | tr a-z A-Z"})
	if res.IsError || !strings.Contains(text(res), `HELLO`) {
		t.Fatalf("run_command: error=%v %s", res.IsError, text(res))
	}
}

func TestServer_FailuresAreErrorResults(t *testing.T) {
	_, ts := testTools(t)
	cs := serve(t, ts, nil, nil)
	for _, tc := range []struct {
		name string
		tool string
		args any
		want string
	}{
		{"hostile path", "read_file", map[string]any{"path": "../../etc/passwd"}, "escapes the workspace root"},
		{"absolute path", "write_file", map[string]any{"path": "/etc/polyweave", "content": "x"}, "write_file"},
		{"schema violation", "echo", map[string]any{"n": "seven"}, "n"},
		{"handler error", "fail", nil, "it broke"},
		{"timeout", "slow", nil, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := callTool(t, cs, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("got isError=%v %q, want an error result containing %q", res.IsError, text(res), tc.want)
			}
		})
	}
	// A panic is answered, the tool actor restarted, and the next call works.
	if res := callTool(t, cs, "panic_once", nil); !res.IsError || !strings.Contains(text(res), "panicked") {
		t.Fatalf("panic: isError=%v %q", res.IsError, text(res))
	}
	if res := callTool(t, cs, "panic_once", nil); res.IsError || text(res) != "recovered" {
		t.Fatalf("after restart: isError=%v %q", res.IsError, text(res))
	}
	// An unknown tool is a protocol error (the client asked for something
	// the server never listed).
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "nope"}); err == nil {
		t.Fatal("unknown tool: no error")
	}
}

func TestServer_ConcurrentCallsEachAnsweredOnce(t *testing.T) {
	_, ts := testTools(t)
	cs := serve(t, ts, nil, nil)
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"n": i}})
			switch {
			case err != nil:
				errs <- err
			case res.IsError || text(res) != fmt.Sprintf(`{"n":%d}`, i):
				errs <- fmt.Errorf("call %d answered %q", i, text(res))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// running reports whether a process whose command line contains marker
// is running (looking at every process, whatever pid namespace the
// sandbox put it in).
func running(marker string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			return true
		}
	}
	return false
}

// waitFor waits until cond holds, or fails after a bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

func TestServer_CancelKillsCommand(t *testing.T) {
	dir, ts := testTools(t)
	cs := serve(t, ts, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command",
			Arguments: map[string]any{"command": "sleep 60.4242 & touch started; wait"}})
		done <- err
	}()
	waitFor(t, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil && running("60.4242")
	})
	cancel() // the client sends notifications/cancelled
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v", err)
	}
	waitFor(t, "the cancelled command to be killed", func() bool { return !running("60.4242") })
	// The server still answers.
	if res := callTool(t, cs, "echo", map[string]any{"n": 1}); res.IsError {
		t.Fatal(text(res))
	}
}

func TestServer_ProgressForLongCalls(t *testing.T) {
	_, ts := testTools(t)
	var mu sync.Mutex
	var got []float64
	copts := &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		if r.Params.ProgressToken == "tok" {
			got = append(got, r.Params.Progress)
		}
	}}
	cs := serve(t, ts, &mcp.ServerOptions{ProgressInterval: 20 * time.Millisecond}, copts)
	params := &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 0.3"}}
	params.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, text(res))
	}
	// Without a token, no progress.
	if res := callTool(t, cs, "run_command", map[string]any{"command": "sleep 0.1"}); res.IsError {
		t.Fatal(text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("got %d progress notifications, want several", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("progress does not increase: %v", got)
		}
	}
}

func TestNewServer_Errors(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	if _, err := mcp.NewServer(nil, nil); err == nil {
		t.Error("nil runtime accepted")
	}
	if _, err := mcp.NewServer(rt, nil); !errors.Is(err, mcp.ErrNoTools) {
		t.Errorf("no tools: %v", err)
	}
	// tools.New refuses a schema of another type; one with no type, which
	// it takes, MCP does not.
	untyped := tools.MustNew(tools.Definition{Name: "untyped", Schema: json.RawMessage(`{}`)})
	if _, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{untyped}}); err == nil || !strings.Contains(err.Error(), "object") {
		t.Errorf("schema without a type: %v", err)
	}
	var _ *actors.Runtime = rt
}

// A result object whose "success" member is false is an isError result,
// whatever way the name is spelled that encoding/json matches; objects
// without one, or with "success": true, are successful results.
func TestServer_SuccessFalseInAnySpelling(t *testing.T) {
	var ts []*tools.Tool
	results := map[string]string{
		"lower":   `{"success":false,"error":"refused"}`,
		"upper":   `{"SUCCESS":false,"error":"refused"}`,
		"escaped": `{"\u0073uccess":false,"error":"refused"}`,
		"folded":  `{"ſuccess":false,"error":"refused"}`, // U+017F folds to s
		"true":    `{"success":true,"n":1}`,
		"none":    `{"successful":false,"n":1}`,
	}
	for name, out := range results {
		ts = append(ts, tools.MustNew(tools.Definition{Name: name, Sync: name != "upper",
			Handler: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(out), nil }}))
	}
	cs := serve(t, ts, nil, nil)
	for name, out := range results {
		res := callTool(t, cs, name, nil)
		wantError := name != "true" && name != "none"
		if res.IsError != wantError {
			t.Errorf("%s: isError=%v %q, want %v", name, res.IsError, text(res), wantError)
		}
		if wantError && text(res) != "refused" {
			t.Errorf("%s: text %q, want the error message alone", name, text(res))
		}
		if !wantError && text(res) != out {
			t.Errorf("%s: text %q, want %s", name, text(res), out)
		}
	}
}
