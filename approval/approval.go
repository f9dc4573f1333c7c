// Package approval has approval policies for tool loops and agents
// (tools.ApprovalOptions, agent.Options.Approval): which calls run, which
// are denied and which wait for a person.
//
// A policy sees each call's tool as it describes itself (capabilities,
// reversible, transactional) and its arguments. The defaults a user
// expects are [Default]'s: read-only and reversible tools run,
// irreversible ones and those that declared no capabilities ask (a tool
// without declared capabilities is described with the default ["read"],
// which says nothing of what it does). [Commands] lets a command tool run without
// asking when its command line is on an allow-list.
package approval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/polyweave/polyweave-go/tools"
)

// Default runs read-only and reversible tools and asks for irreversible
// ones and for tools that declared no capabilities
// (tools.DefaultApprovalPolicy).
func Default() tools.ApprovalPolicy { return tools.DefaultApprovalPolicy }

// RunAll runs every call: approval is off.
func RunAll() tools.ApprovalPolicy {
	return func(tools.ApprovalCall) (tools.Verdict, string) { return tools.VerdictRun, "" }
}

// DenyIrreversible denies every call of an irreversible tool (the model
// is told why and goes on) and runs the others.
func DenyIrreversible() tools.ApprovalPolicy {
	return func(c tools.ApprovalCall) (tools.Verdict, string) {
		if !c.Tool.Reversible {
			return tools.VerdictDeny, fmt.Sprintf("%s is irreversible and this session does not allow irreversible actions", c.Tool.Name)
		}
		return tools.VerdictRun, ""
	}
}

// AskAll asks for every call that is not read-only; a tool that declared
// no capabilities is not (tools.Description.ReadOnly).
func AskAll() tools.ApprovalPolicy {
	return func(c tools.ApprovalCall) (tools.Verdict, string) {
		if c.ReadOnly() {
			return tools.VerdictRun, ""
		}
		if !c.Tool.CapabilitiesDeclared() {
			return tools.VerdictAsk, tools.UndeclaredCapabilities(c.Tool.Name)
		}
		return tools.VerdictAsk, fmt.Sprintf("%s changes things (%s)", c.Tool.Name, strings.Join(c.Tool.Capabilities, ", "))
	}
}

// shellSpecial are the characters that make a command line more than one
// simple command (or expand into something else).
const shellSpecial = ";&|`$()<>\n\\*?[]{}~!#\"'"

// isBlank reports whether r separates the words of a simple command, as
// sh splits them (a newline is in shellSpecial): other white space (a
// carriage return, a no-break space) is part of a word, so the program
// "ls\u00a0x" is not "ls".
func isBlank(r rune) bool { return r == ' ' || r == '\t' }

// Commands runs the calls of tool whose "command" argument is a simple
// command line (no shell operators, redirections, substitutions, quotes
// or globs) starting with one of the allowed programs, e.g. "ls", "cat";
// any other call is decided by next (nil: [Default]).
//
// Warning: only the program is checked, never its arguments, so allowing
// a program allows everything it can be told to do. Many common programs
// run other programs or change files: "go" allows "go run ./evil" (any
// code in the workspace), "env" allows "env rm -rf x" (any program),
// "find" allows "find . -delete", "git" allows
// "git config core.hooksPath …" (code that later git commands run), and
// likewise "xargs", "make", "npm", "python", "sh", "sed -i". Allow only
// programs that can neither run others nor write, or leave them to next
// to ask.
func Commands(tool string, allow []string, next tools.ApprovalPolicy) tools.ApprovalPolicy {
	allow = slices.Clone(allow)
	if next == nil {
		next = Default()
	}
	return func(c tools.ApprovalCall) (tools.Verdict, string) {
		if c.Tool.Name != tool {
			return next(c)
		}
		var in struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(c.Arguments, &in) == nil && !strings.ContainsAny(in.Command, shellSpecial) {
			if f := strings.FieldsFunc(in.Command, isBlank); len(f) > 0 && slices.Contains(allow, f[0]) {
				return tools.VerdictRun, ""
			}
		}
		v, why := next(c)
		if v == tools.VerdictAsk && why != "" {
			why += "; the command is not on the allow-list"
		}
		return v, why
	}
}
