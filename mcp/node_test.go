package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/workspace"
)

// The Node programs these tests run against (the TypeScript SDK, the
// reference servers, Node 22) are installed once by scripts/mcp-node.sh
// from the committed lock file.
var (
	nodeOnce sync.Once
	nodeDir  string
	nodeErr  error
)

func nodePrograms(t *testing.T) string {
	t.Helper()
	nodeOnce.Do(func() {
		var out, errb bytes.Buffer
		cmd := exec.Command("bash", filepath.Join("..", "scripts", "mcp-node.sh"))
		cmd.Stdout, cmd.Stderr = &out, &errb
		if nodeErr = cmd.Run(); nodeErr != nil {
			nodeErr = &installError{err: nodeErr, stderr: errb.String()}
			return
		}
		nodeDir = strings.TrimSpace(out.String())
	})
	if nodeErr != nil {
		t.Fatalf("%v\n(install them by hand with: bash scripts/mcp-node.sh)", nodeErr)
	}
	return nodeDir
}

type installError struct {
	err    error
	stderr string
}

func (e *installError) Error() string {
	return "install the MCP test programs: " + e.err.Error() + "\n" + e.stderr
}

// node runs a Node 22 program with the installed packages on its path.
func node(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	dir := nodePrograms(t)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	return cmd
}

// tsReport is what testdata/tsclient.cjs prints.
type tsReport struct {
	Tools []struct {
		Name        string `json:"name"`
		Annotations struct {
			ReadOnlyHint    bool  `json:"readOnlyHint"`
			DestructiveHint *bool `json:"destructiveHint"`
		} `json:"annotations"`
		HasSchema bool `json:"hasSchema"`
	} `json:"tools"`
	Write, Read, Run struct {
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
	}
	Hostile struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"hostile"`
	Cancelled     string `json:"cancelled"`
	KilledAfterMs int    `json:"killedAfterMs"`
	Concurrent    int    `json:"concurrent"`
}

func runTSClient(t *testing.T, mode, dir string, target ...string) tsReport {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "tsclient.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*60e9)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := node(t, ctx, append([]string{script, mode, dir}, target...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, errb.String())
	}
	var r tsReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	return r
}

func checkTSReport(t *testing.T, dir string, r tsReport) {
	t.Helper()
	names := map[string]bool{}
	for _, tl := range r.Tools {
		names[tl.Name] = tl.HasSchema
		if tl.Name == "read_file" && !tl.Annotations.ReadOnlyHint {
			t.Error("read_file is not read-only for the TypeScript client")
		}
		if tl.Name == "run_command" && (tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint) {
			t.Error("run_command is not destructive for the TypeScript client")
		}
	}
	for _, n := range []string{"read_file", "write_file", "run_command"} {
		if !names[n] {
			t.Errorf("tool %s missing or without schema: %v", n, names)
		}
	}
	if r.Write.IsError || r.Write.Structured["success"] != true {
		t.Errorf("write_file: %+v", r.Write)
	}
	if r.Read.IsError || r.Read.Structured["content"] != "hello from ts\n" {
		t.Errorf("read_file: %+v", r.Read)
	}
	if r.Run.IsError || strings.TrimSpace(r.Run.Structured["stdout"].(string)) != "14" {
		t.Errorf("run_command: %+v", r.Run)
	}
	if !r.Hostile.IsError || !strings.Contains(r.Hostile.Text, "escapes the workspace root") {
		t.Errorf("hostile path: %+v", r.Hostile)
	}
	if !strings.HasPrefix(r.Cancelled, "rejected") {
		t.Errorf("cancelled call: %s", r.Cancelled)
	}
	if r.Concurrent != 100 {
		t.Errorf("%d of 100 concurrent calls answered with their own result", r.Concurrent)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "many", "99.txt")); err != nil || string(b) != "99" {
		t.Errorf("many/99.txt: %q %v", b, err)
	}
}

func TestTypeScriptClient_Stdio(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "polyweave-mcp")
	build := exec.Command("go", "build", "-o", bin, "../cmd/polyweave-mcp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build polyweave-mcp: %v\n%s", err, out)
	}
	dir := t.TempDir()
	checkTSReport(t, dir, runTSClient(t, "stdio", dir, bin, "-dir", dir))
}

func TestTypeScriptClient_HTTP(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ts, err := workspace.Tools(ws)
	if err != nil {
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	h, err := srv.ListenHTTP(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = srv.Close(context.Background())
		if err := h.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	checkTSReport(t, dir, runTSClient(t, "http", dir, h.URL()))
}
