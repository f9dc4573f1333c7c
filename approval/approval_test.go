package approval_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/approval"
	"github.com/polyweave/polyweave-go/tools"
)

func describe(def tools.Definition) tools.Description { return tools.MustNew(def).Description() }

var (
	readFile   = describe(tools.Definition{Name: "read_file", Capabilities: []string{"read"}, Idempotent: true})
	writeFile  = describe(tools.Definition{Name: "write_file", Capabilities: []string{"write"}, Idempotent: true})
	runCommand = describe(tools.Definition{Name: "run_command", Capabilities: []string{"execute"}, Irreversible: true})
	sendMail   = describe(tools.Definition{Name: "send_mail", Capabilities: []string{"network"}, Irreversible: true, Transactional: true})
	tidy       = describe(tools.Definition{Name: "tidy"}) // declares nothing: described with the default ["read"]
)

func callOf(tool tools.Description, args string) tools.ApprovalCall {
	return tools.ApprovalCall{StreamID: "s", ToolCallID: "c1", Tool: tool, Arguments: json.RawMessage(args)}
}

func TestPolicies(t *testing.T) {
	allow := approval.Commands("run_command", []string{"go", "ls"}, nil)
	custom := func(c tools.ApprovalCall) (tools.Verdict, string) {
		if strings.Contains(string(c.Arguments), "secret") {
			return tools.VerdictDeny, "secrets stay put"
		}
		return approval.Default()(c)
	}
	cases := []struct {
		name   string
		policy tools.ApprovalPolicy
		call   tools.ApprovalCall
		want   tools.Verdict
		reason string // a part of the reason, when it matters
	}{
		{"default: read-only runs", approval.Default(), callOf(readFile, `{"path":"a"}`), tools.VerdictRun, ""},
		{"default: reversible write runs", approval.Default(), callOf(writeFile, `{"path":"a","content":"x"}`), tools.VerdictRun, ""},
		{"default: irreversible asks", approval.Default(), callOf(runCommand, `{"command":"ls"}`), tools.VerdictAsk, "run_command is irreversible"},
		{"default: irreversible transactional asks", approval.Default(), callOf(sendMail, `{}`), tools.VerdictAsk, "send_mail"},
		{"run all", approval.RunAll(), callOf(runCommand, `{"command":"rm -rf x"}`), tools.VerdictRun, ""},
		{"deny irreversible", approval.DenyIrreversible(), callOf(runCommand, `{"command":"ls"}`), tools.VerdictDeny, "irreversible"},
		{"deny irreversible lets writes run", approval.DenyIrreversible(), callOf(writeFile, `{}`), tools.VerdictRun, ""},
		{"ask all: reads run", approval.AskAll(), callOf(readFile, `{}`), tools.VerdictRun, ""},
		{"ask all: writes ask", approval.AskAll(), callOf(writeFile, `{}`), tools.VerdictAsk, "write"},
		{"ask all: undeclared asks", approval.AskAll(), callOf(tidy, `{}`), tools.VerdictAsk, "tidy does not declare its capabilities"},
		{"default: undeclared asks", approval.Default(), callOf(tidy, `{}`), tools.VerdictAsk, "tidy"},
		{"allow-list: allowed program runs", allow, callOf(runCommand, `{"command":"go test ./..."}`), tools.VerdictRun, ""},
		{"allow-list: other program asks", allow, callOf(runCommand, `{"command":"rm -rf /"}`), tools.VerdictAsk, "not on the allow-list"},
		{"allow-list: chained command asks", allow, callOf(runCommand, `{"command":"ls; rm -rf /"}`), tools.VerdictAsk, "allow-list"},
		{"allow-list: substitution asks", allow, callOf(runCommand, `{"command":"ls $(rm x)"}`), tools.VerdictAsk, ""},
		{"allow-list: redirection asks", allow, callOf(runCommand, `{"command":"ls > f"}`), tools.VerdictAsk, ""},
		{"allow-list: prefix of a name is not the name", allow, callOf(runCommand, `{"command":"gofmt -w ."}`), tools.VerdictAsk, ""},
		{"allow-list: words split as the shell splits them", allow, callOf(runCommand, `{"command":"ls\u00a0x"}`), tools.VerdictAsk, "allow-list"},
		{"allow-list: carriage return is no separator", allow, callOf(runCommand, `{"command":"ls\rx"}`), tools.VerdictAsk, "allow-list"},
		{"allow-list: tabs separate", allow, callOf(runCommand, `{"command":"ls\t-la"}`), tools.VerdictRun, ""},
		{"allow-list: bad arguments ask", allow, callOf(runCommand, `not json`), tools.VerdictAsk, ""},
		{"allow-list: other tools follow next", allow, callOf(writeFile, `{}`), tools.VerdictRun, ""},
		{"custom: denies by argument", custom, callOf(writeFile, `{"path":"secret.txt"}`), tools.VerdictDeny, "secrets stay put"},
		{"custom: falls back to the default", custom, callOf(runCommand, `{"command":"ls"}`), tools.VerdictAsk, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := tc.policy(tc.call)
			if got != tc.want || !strings.Contains(why, tc.reason) {
				t.Fatalf("verdict %v %q, want %v with %q", got, why, tc.want, tc.reason)
			}
		})
	}
}

// TestUndeclaredReason: a tool that declares no capabilities is asked
// about with the same words by the loop's default policy and by AskAll,
// the words of tools.UndeclaredCapabilities.
func TestUndeclaredReason(t *testing.T) {
	want := tools.UndeclaredCapabilities("tidy")
	if !strings.Contains(want, "tidy does not declare its capabilities") {
		t.Fatalf("UndeclaredCapabilities(tidy) = %q, want it to name the tool and say it declares no capabilities", want)
	}
	for name, policy := range map[string]tools.ApprovalPolicy{
		"tools.DefaultApprovalPolicy": tools.DefaultApprovalPolicy,
		"approval.Default":            approval.Default(),
		"approval.AskAll":             approval.AskAll(),
	} {
		if v, got := policy(callOf(tidy, `{}`)); v != tools.VerdictAsk || got != want {
			t.Errorf("%s of an undeclared tool = %v, %q; want ask, %q", name, v, got, want)
		}
	}
}
