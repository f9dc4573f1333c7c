//go:build linux

package workspace

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// The durable side of a host kill: a durable tool loop runs a sandboxed
// side-effecting command in a host process, the host is SIGKILLed while
// the command runs, and the session resumed from its bbolt store answers
// the call with an error that says it was stopped.

const (
	resumeModeEnv = "PW_RESUME_MODE" // run or finish
	resumeDirEnv  = "PW_RESUME_DIR"
)

func resumeScript() scripted.Script {
	args, _ := json.Marshal(RunCommandInput{Command: hostKillCommand})
	return scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: RunCommandToolName, Arguments: string(args)}}},
		{Text: "Done."},
	}}
}

// TestHostKillResumeChild is the host's body; it does nothing unless
// started by TestHostKilled_ResumedCallSaysStopped.
func TestHostKillResumeChild(t *testing.T) {
	tooltest.ChildBody(t, resumeModeEnv, resumeDirEnv, runResumeChild)
}

func runResumeChild(mode, dir string) error {
	store, err := boltstore.Open(filepath.Join(dir, "session.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	ws, err := New(filepath.Join(dir, "ws"), &Options{Sandbox: SandboxRequired, CommandTimeout: time.Minute,
		InheritEnv: append(slices.Clone(DefaultInheritEnv), hostileCaseEnv)})
	if err != nil {
		return err
	}
	defer ws.Close()
	bound, err := Tools(ws)
	if err != nil {
		return err
	}
	model, err := scripted.New(resumeScript(), nil)
	if err != nil {
		return err
	}
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "loop", Tools: bound},
		Session:       &tools.SessionOptions{ID: "session-1", Store: store},
	})
	if err != nil {
		return err
	}
	if _, err := tooltest.AskLoop(loop, json.RawMessage(`[{"role":"user","content":"make the effect"}]`), 2*time.Minute); err != nil {
		return err
	}
	last, err := tooltest.LastRequestMessages(model)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "last-request.json"), last, 0o644)
}

func TestHostKilled_ResumedCallSaysStopped(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	mustDo(t, os.Mkdir(ws, 0o755))
	mustDo(t, syscall.Mkfifo(filepath.Join(ws, "ready.fifo"), 0o644))
	id := randomHex()
	child := func(mode string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostKillResumeChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), resumeModeEnv+"="+mode, resumeDirEnv+"="+dir, hostileCaseEnv+"="+id)
		return cmd
	}

	host := child("run")
	var out bytes.Buffer
	host.Stdout, host.Stderr = &out, &out
	startReadyHost(t, host, ws, id, &out)
	gone := killAndTimeDeaths(t, host, id)
	_ = host.Wait()
	t.Logf("the command's processes were gone %s after the host died (how soon: BenchmarkHostKilled_SandboxedCommandGone)", gone)
	mustDo(t, os.WriteFile(filepath.Join(ws, "go"), nil, 0o644))

	resumed := child("finish")
	if b, err := resumed.CombinedOutput(); err != nil {
		t.Fatalf("resumed session: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(ws, "effect")); !os.IsNotExist(err) {
		t.Errorf("the side effect happened: the command was run again or survived (%v)", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "last-request.json"))
	mustDo(t, err)
	var msgs []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
	}
	mustDo(t, json.Unmarshal(b, &msgs))
	var result string
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID == "c1" && m.Content != nil {
			result = *m.Content
		}
	}
	if !strings.Contains(result, `"success":false`) || !strings.Contains(result, "interrupted") ||
		!strings.Contains(result, "certainly stopped") {
		t.Errorf("the resumed call's answer %q does not say it was stopped", result)
	}
}
