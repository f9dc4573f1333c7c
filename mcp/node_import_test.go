package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// importNode imports a reference MCP server installed by
// scripts/mcp-node.sh (bin is its command in node_modules/.bin).
func importNode(t *testing.T, rt *actors.Runtime, prefix, bin string, args ...string) *mcp.Imported {
	t.Helper()
	binDir := filepath.Join(nodePrograms(t), "node_modules", ".bin")
	return imported(t, rt, &mcp.ImportOptions{
		Command: append([]string{filepath.Join(binDir, bin)}, args...),
		Env:     []string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, // its node is Node 22
		Prefix:  prefix,
	})
}

func toolNamed(t *testing.T, ts []*tools.Tool, name string) *tools.Tool {
	t.Helper()
	for _, tl := range ts {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func jsonArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestImport_ServerFilesystem(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	im := importNode(t, rt, "fs_", "mcp-server-filesystem", dir)
	file := filepath.Join(dir, "note.txt")
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "write", Name: "fs_write_file",
			Arguments: jsonArgs(map[string]string{"path": file, "content": "written through MCP\n"})}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "read", Name: "fs_read_text_file", Arguments: jsonArgs(map[string]string{"path": file})},
			{ID: "list", Name: "fs_list_directory", Arguments: jsonArgs(map[string]string{"path": dir})},
			{ID: "hostile", Name: "fs_read_text_file", Arguments: jsonArgs(map[string]string{"path": "/etc/passwd"})},
			{ID: "invalid", Name: "fs_read_text_file", Arguments: `{"path":42}`},
		}},
		scripted.Turn{Text: "done"})
	if b, err := os.ReadFile(file); err != nil || string(b) != "written through MCP\n" {
		t.Fatalf("file: %q %v (result %v)", b, err, res["write"])
	}
	if f := res["read"]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "written through MCP") {
		t.Errorf("read: %v", f)
	}
	if f := res["list"]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "note.txt") {
		t.Errorf("list: %v", f)
	}
	if f := res["hostile"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "denied") {
		t.Errorf("outside the allowed folder: %v", f)
	}
	if f := res["invalid"]; f == nil || tools.KindOf(f) != tools.FailureInvalidArguments {
		t.Errorf("schema violation not caught before the call: %v", f)
	}
}

// pidsRunning returns the pids of processes whose command line contains
// marker.
func pidsRunning(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestImport_ServerEverythingKilledMidCall(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	im := importNode(t, rt, "ev_", "mcp-server-everything")
	ts := im.Tools()
	// The long operation signals when it is called, so that the server can
	// be killed while the call is in flight.
	long := toolNamed(t, ts, "ev_trigger-long-running-operation")
	started := make(chan struct{})
	def := long.Definition()
	inner := def.Handler
	def.Name = "long_operation"
	def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
		close(started)
		return inner(ctx, args)
	}
	ts = append(ts, tools.MustNew(def))
	before := pidsRunning("mcp-server-everything")
	if len(before) == 0 {
		t.Fatal("server-everything is not running")
	}
	killed := make(chan error, 1)
	go func() {
		<-started
		var err error
		for _, pid := range before {
			if e := killPID(pid); e != nil {
				err = e
			}
		}
		killed <- err
	}()
	res := runLoop(t, rt, ts,
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "echo", Name: "ev_echo", Arguments: `{"message":"hello"}`},
			{ID: "sum", Name: "ev_get-sum", Arguments: `{"a":2,"b":40}`},
			{ID: "structured", Name: "ev_get-structured-content", Arguments: `{"location":"Chicago"}`},
			{ID: "invalid", Name: "ev_get-sum", Arguments: `{"a":"two","b":40}`},
		}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "long", Name: "long_operation", Arguments: `{"duration":60,"steps":60}`}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "echo2", Name: "ev_echo", Arguments: `{"message":"again"}`}}},
		scripted.Turn{Text: "done"})
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"echo": "hello", "sum": "42", "echo2": "again"} {
		if f := res[id]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), want) {
			t.Errorf("%s: %v", id, f)
		}
	}
	var weather map[string]any
	if f := res["structured"]; f == nil || f.IsErrorResult() || json.Unmarshal(f.GetPayload(), &weather) != nil || weather == nil {
		t.Errorf("structured content: %v", f)
	}
	if f := res["invalid"]; f == nil || tools.KindOf(f) != tools.FailureInvalidArguments {
		t.Errorf("schema violation not caught before the call: %v", f)
	}
	if f := res["long"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "MCP server") {
		t.Errorf("call in flight when the server was killed: %v", f)
	}
	if n := im.Connections(); n != 2 {
		t.Errorf("%d connections, want 2 (one restart)", n)
	}
}
