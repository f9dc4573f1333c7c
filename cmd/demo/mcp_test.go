package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/models/openai/openaitest"
	"github.com/polyweave/polyweave-go/models/scripted"
)

func TestMCPFlag(t *testing.T) {
	var m mcpServers
	for _, v := range []string{`fs=npx -y "a \"b\"" 'c d' e\ f`, `./server --flag=1`} {
		if err := m.Set(v); err != nil {
			t.Fatalf("-mcp %s: %v", v, err)
		}
	}
	want := mcpServers{{prefix: "fs_", command: []string{"npx", "-y", `a "b"`, "c d", "e f"}},
		{command: []string{"./server", "--flag=1"}}}
	if len(m) != 2 || m[0].prefix != want[0].prefix || !slices.Equal(m[0].command, want[0].command) ||
		m[1].prefix != "" || !slices.Equal(m[1].command, want[1].command) {
		t.Fatalf("parsed %#v, want %#v", m, want)
	}
	for _, bad := range []string{"", "   ", "fs=", `a 'b`, `a "b`, `a \`} {
		if err := new(mcpServers).Set(bad); err == nil {
			t.Errorf("-mcp %q accepted", bad)
		}
	}
	cfg, err := parseFlags([]string{"-mcp", "a b", "-mcp", "x=c"}, new(strings.Builder))
	if err != nil || len(cfg.mcp) != 2 || cfg.mcp[1].prefix != "x_" {
		t.Fatalf("two -mcp flags: %+v, %v", cfg.mcp, err)
	}
}

// mcpServerBin is cmd/polyweave-mcp, an MCP server of workspace tools,
// built once by TestMain for the demo to import.
var mcpServerBin string

// buildMCPServer waits for TestMain's build of cmd/polyweave-mcp and
// returns the binary's path.
func buildMCPServer(t *testing.T) string {
	t.Helper()
	waitBuilt(t)
	return mcpServerBin
}

// TestRun_MCPServerTools: with -mcp the model is offered the MCP server's
// tools beside the workspace's, and its call of one runs in the server
// process (here: reading a file of another folder, the server's).
func TestRun_MCPServerTools(t *testing.T) {
	bin := buildMCPServer(t)
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "note.txt"), []byte("from the MCP server's folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer([]scripted.Turn{
		{Text: "Reading the note.", ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ext_read_file", Arguments: `{"path":"note.txt"}`}}},
		{Text: "The note says hello."},
	})
	defer srv.Close()
	stdout, stderr, err := runInProcess(t, "-base-url", srv.URL, "-workspace", t.TempDir(),
		"-mcp", "ext="+bin+" -dir '"+other+"'")
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "ext_read_file, ext_run_command, ext_write_file") {
		t.Errorf("the transcript does not list the imported tools:\n%s", stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	var offered []struct {
		Function struct{ Name string } `json:"function"`
	}
	if err := json.Unmarshal(reqs[0]["tools"], &offered); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range offered {
		names = append(names, o.Function.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "ext_read_file,ext_run_command,ext_write_file,read_file,run_command,write_file" {
		t.Errorf("tools offered: %s", got)
	}
	var msgs []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(reqs[0]["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	// The imported tools run in the server's process, confined by
	// nothing of ours: the prompt must not tell the model otherwise.
	if sys := msgs[0].Content; msgs[0].Role != "system" || !strings.Contains(sys, "ext_read_file") ||
		!strings.Contains(sys, "not sandboxed") {
		t.Errorf("the system prompt does not say the imported tools run unconfined: %+v", msgs[0])
	}
	if err := json.Unmarshal(reqs[1]["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.Contains(last.Content, "from the MCP server's folder") {
		t.Errorf("the tool result the model got: %+v", last)
	}
}

// TestRun_MCPToolNameClash: a server whose tools clash with the
// workspace's is refused as a usage error that says how to name it.
func TestRun_MCPToolNameClash(t *testing.T) {
	bin := buildMCPServer(t)
	_, _, err := runInProcess(t, "-workspace", t.TempDir(), "-mcp", bin+" -dir "+t.TempDir())
	var usage *usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "clashes") || !strings.Contains(err.Error(), "name=") {
		t.Fatalf("a clashing server: %v", err)
	}
}

// TestRun_MCPServerThatCannotStart: the run fails at once, and the
// transcript shows what the server said on stderr.
func TestRun_MCPServerThatCannotStart(t *testing.T) {
	stdout, _, err := runInProcess(t, "-workspace", t.TempDir(), "-mcp", `sh -c 'echo "missing token" >&2; exit 1'`)
	if err == nil || !strings.Contains(err.Error(), "-mcp") {
		t.Fatalf("a server that exits at once: %v", err)
	}
	if !strings.Contains(stdout, "sh: missing token") {
		t.Errorf("the server's stderr is not in the transcript:\n%s", stdout)
	}
}

// TestRun_MCPServerThatNeverAnswers: the transcript says the demo is
// waiting for the server, and the error says it did not answer in time.
func TestRun_MCPServerThatNeverAnswers(t *testing.T) {
	defer func(d time.Duration) { mcpConnectTimeout = d }(mcpConnectTimeout)
	mcpConnectTimeout = 300 * time.Millisecond
	stdout, _, err := runInProcess(t, "-workspace", t.TempDir(), "-mcp", "sleep 100")
	if err == nil || !strings.Contains(err.Error(), "-mcp sleep 100: the server did not answer initialize and list its tools within 300ms") {
		t.Errorf("a silent server: %v", err)
	}
	if !strings.Contains(stdout, "mcp        starting sleep 100 and waiting for its tool list (up to 300ms)") {
		t.Errorf("the transcript does not say it waits for the server:\n%s", stdout)
	}
}
