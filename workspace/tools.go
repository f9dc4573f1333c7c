package workspace

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/tools"
)

// Tools binds the read_file, write_file and run_command tools of ws as
// typed tools (package tools), their schemas inferred from the
// workspace's input types. write_file has the "write" capability;
// run_command has "execute" and is irreversible. Its timeout is the
// workspace's [Options.CommandTimeout] (the seed's run_command timeout,
// 30 s by default), which covers setting the command's sandbox up: at
// it the workspace kills the command (its whole sandbox, or its process
// group) and answers with what it printed. Its tool timeout
// ([tools.Definition.Timeout]) is a backstop past that answer (the
// command's timeout, KillGrace, WaitDelay and a second more): should the
// workspace not answer by then, the call is answered as timed out and
// its context cancelled, which kills the command. A CANCEL cancels the
// call too. When the sandbox makes commands die with their host,
// run_command is DiesWithProcess: a durable loop resuming after a crash
// says the interrupted command was certainly stopped.
//
// A result with Success false (a refused path, a missing file, an empty
// command, a command that could not start) is an error result of the
// call: the model reads the same JSON, and the frame is marked failed
// (see [failedResult] for the kinds). A command that ran is not an error
// result whatever its exit code, timed out or not: the model reads what
// it did.
//
// It lives here, not in package tools, so that package tools builds on
// every system.
func Tools(ws *Workspace) ([]*tools.Tool, error) {
	read, err := tools.NewTyped(tools.Definition{Name: ReadFileToolName, Description: ReadFileDescription,
		Capabilities: []string{"read"}, Idempotent: true}, markFailed(ws.ReadFile))
	if err != nil {
		return nil, err
	}
	write, err := tools.NewTyped(tools.Definition{Name: WriteFileToolName, Description: WriteFileDescription,
		Capabilities: []string{"write"}, Idempotent: true}, markFailed(ws.WriteFile))
	if err != nil {
		return nil, err
	}
	run, err := tools.NewTyped(tools.Definition{Name: RunCommandToolName, Description: ws.CommandDescription(),
		Capabilities: []string{"execute"}, Irreversible: true, Timeout: ws.callTimeout(),
		DiesWithProcess: ws.Protections().DiesWithHost}, markFailed(ws.RunCommand))
	if err != nil {
		return nil, err
	}
	return []*tools.Tool{read, write, run}, nil
}

// callTimeout is run_command's tool timeout: a second past the longest
// the workspace takes to answer a call whose command it stops at the
// timeout (the command's timeout, the grace before SIGKILL, the wait for
// the output pipes).
func (w *Workspace) callTimeout() time.Duration {
	return w.opts.CommandTimeout + w.opts.KillGrace + w.opts.WaitDelay + time.Second
}

// CommandDescription is run_command's description as the model reads
// it: [RunCommandDescription], and what sandboxed commands may do, as
// [Workspace.Protections] says (what they may write, read, and whether
// they have the network).
func (w *Workspace) CommandDescription() string {
	p := w.Protections()
	if !p.Sandbox {
		return RunCommandDescription
	}
	write := "the workspace and /tmp"
	if p.FreshDev {
		write = "the workspace, /tmp and /dev/shm"
	}
	var parts []string
	if p.ReadOnlyRoot || p.Landlock > 0 {
		parts = append(parts, "only "+write+" are writable")
	}
	if p.Landlock > 0 {
		parts = append(parts, "only the system's directories (/usr, /etc, …), the workspace and /tmp are readable")
	}
	if p.NoNetwork {
		parts = append(parts, "there is no network")
	} else {
		parts = append(parts, "the network is reachable")
	}
	return RunCommandDescription + " Commands run sandboxed: " + strings.Join(parts, "; ") + "."
}

// result is a tool result that says whether the call failed, and why.
type result interface {
	MarshalJSON() ([]byte, error)
	failed() (Reason, string, bool)
}

func (r ReadFileResult) failed() (Reason, string, bool)   { return r.Reason, r.Error, !r.Success }
func (r WriteFileResult) failed() (Reason, string, bool)  { return r.Reason, r.Error, !r.Success }
func (r RunCommandResult) failed() (Reason, string, bool) { return r.Reason, r.Error, !r.Success }

// markFailed makes fn's unsuccessful results error results of the call
// (see failedResult).
func markFailed[In any, Out result](fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		out, err := fn(ctx, in)
		if err != nil {
			return out, err
		}
		if reason, msg, failed := out.failed(); failed {
			return out, failedResult(out, reason, msg)
		}
		return out, nil
	}
}

// failedResult is the error that answers a call with the unsuccessful
// result out as an error result: its JSON is what the model reads, as
// for a successful one. Its kind is tools.FailureHandler when the
// workspace itself failed (a file system error, the workspace directory
// gone, a shell that could not start), which counts against the tool's
// circuit breaker; tools.FailureNotFound when the path names no file (a
// missing file, a link to one), tools.FailureInvalidArguments when the
// call asked for what cannot be done (a refused path, an empty command,
// too large a content), and tools.FailureUnavailable when a command never
// ran because its sandbox was not set up within the command's timeout, or
// it or its sandbox could not be started for want of a resource
// (sandbox.ErrResources, descriptors or processes of the workspace's
// own: resourceError, or the host's processes when a sandbox's helper
// forks the shell): the call may succeed if tried again, the tool is not broken. None of the last three does: a
// sandbox that was not ready in time must not make the breaker refuse the
// well-formed calls that follow.
func failedResult(out result, reason Reason, msg string) error {
	payload, err := out.MarshalJSON()
	if err != nil {
		return err
	}
	kind := failureKind(reason)
	if r, ok := out.(RunCommandResult); ok && r.notReady {
		kind = tools.FailureUnavailable
	}
	return &tools.ResultError{Payload: payload, Kind: kind, Err: errors.New(msg)}
}

// failureKind is the kind of an error result that answers a call
// refused or failed for reason (see failedResult).
func failureKind(reason Reason) tools.FailureKind {
	switch reason {
	case ReasonIO, ReasonWorkspaceGone, ReasonStartFailed, "":
		return tools.FailureHandler
	case ReasonNotFound, ReasonDanglingLink:
		return tools.FailureNotFound
	}
	return tools.FailureInvalidArguments
}
