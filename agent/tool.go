package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// DefaultToolSchema is the input schema of an agent given as a tool.
var DefaultToolSchema = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"What to do, in full: the agent sees nothing else of the conversation."}},"required":["task"],"additionalProperties":false}`)

// ToolOptions configure [AsTool]. A nil *ToolOptions or a zero field
// means the default; options are copied.
type ToolOptions struct {
	// Name is the tool's name; default the agent's name.
	Name string
	// Description tells the calling model what the agent is for; default
	// "Delegate a task to the <name> agent and get its answer."
	Description string
	// Schema is the input schema; default [DefaultToolSchema]. With
	// another schema, set Prompt too.
	Schema json.RawMessage
	// Prompt turns a call's arguments into the agent's conversation;
	// default: the "task" string as one user message, a call whose task
	// is empty or blank refused as invalid arguments (a
	// *tools.ArgumentsError, the model told why; the agent is not asked).
	// An error of Prompt is the call's error result.
	Prompt func(args json.RawMessage) ([]models.Message, error)
	// Timeout bounds one delegation; zero means tools.DefaultTimeout,
	// tools.NoTimeout disables it.
	Timeout time.Duration
	// OnEvent, when set, is called with every event of each delegated
	// conversation as [Agent.Stream] gives them and its session id, on
	// the goroutine running the call, for hosts that show the sub-agent's
	// progress. The last event is EventDone when it answered, else an
	// EventError whose Text is the error the call fails with and whose
	// Answer is what was answered so far (a failure, a cancel, a
	// timeout). The delegation waits for it to return.
	OnEvent func(session string, ev Event)
	// Flags, when set, replace the flags derived from the agent's tools
	// ([Agent.ToolFlags]), for hosts that know better (an agent whose
	// writes all go to a sandbox that is thrown away, say). Start from
	// Agent.ToolFlags and change what you know; empty Capabilities keep
	// the derived ones, so an override never makes the tool read-only by
	// omission.
	Flags *ToolFlags
}

// ToolFlags are the flags of an agent given as a tool: the fields of
// tools.Definition that say what calling it may do, as approval policies
// (tools.ApprovalCall) and MCP clients (annotations) read them.
type ToolFlags struct {
	Capabilities    []string
	Transactional   bool
	Irreversible    bool
	Idempotent      bool
	DiesWithProcess bool
}

// delegateCapability tags a delegation that may change something.
const delegateCapability = "delegate"

// ToolFlags derives the flags of a's delegation tool ([AsTool]) from its
// tools, since a delegation may do whatever its conversation calls:
//   - read-only (Capabilities ["read"]) when every tool is read-only (its
//     only capability is "read"), an agent without tools included;
//     otherwise "delegate" followed by the tools' capabilities;
//   - irreversible when any tool is;
//   - idempotent only when every tool is idempotent and read-only (a
//     second run may call writers differently, so idempotent writers do
//     not make the delegation idempotent);
//   - dying with the process when every tool does (the conversation
//     itself runs in this process);
//   - never transactional: a conversation's calls do not commit together.
//
// A nil or zero Agent has no flags (none of the above: not read-only).
func (a *Agent) ToolFlags() ToolFlags {
	if a.usable() != nil {
		return ToolFlags{}
	}
	f := ToolFlags{Idempotent: true, DiesWithProcess: true}
	var caps []string
	readOnly := true
	for _, t := range a.opts.Tools {
		d := t.Definition()
		ro := t.Description().ReadOnly()
		readOnly = readOnly && ro
		f.Irreversible = f.Irreversible || d.Irreversible
		f.Idempotent = f.Idempotent && d.Idempotent && ro
		f.DiesWithProcess = f.DiesWithProcess && d.DiesWithProcess
		for _, c := range d.Capabilities {
			if !slices.Contains(caps, c) {
				caps = append(caps, c)
			}
		}
	}
	if readOnly {
		f.Capabilities = []string{tools.DefaultCapability}
	} else {
		f.Capabilities = append([]string{delegateCapability}, slices.DeleteFunc(caps, func(c string) bool { return c == delegateCapability })...)
	}
	return f
}

// toolAnswer is the result a delegation gives the calling model.
type toolAnswer struct {
	Success   bool   `json:"success"`
	Answer    string `json:"answer"`
	ToolCalls int    `json:"tool_calls"`
}

// AsTool gives sub to other agents as a tool: each call runs a
// conversation of sub (its own session, named after the tool, a random
// tag of sub's and a counter of sub's delegations, "writer-K3MZQ7PXA2-1",
// so that it never takes a session id a host gives sub's own Runs, and a
// host started again on a Store never names a delegation after one an
// earlier process stored) and answers
// {"success":true,"answer":...,"tool_calls":n}.
// When sub has a Store, the delegation's session is kept there while it
// runs, so that an attempt after a crash of its loop resumes it without
// running its completed calls again, and it is deleted once the
// delegation has returned and its loop has stopped (one waiting for
// approval is kept: Resume goes on with it, and a Resume by the same
// sub value deletes it once it returns not waiting; one resumed by
// another Agent value, of another process say, is kept). Nothing resumes a
// delegation across processes: a host that dies during one leaves its
// session in the store (the ids are those ToolOptions.OnEvent was given;
// delete them with tools.DeleteSession of sub.SessionKey(id)), and a
// call given again after the host started again is a new delegation.
// The conversation runs on a tool loop of its own, started as a child of
// the calling tool's actor (in the calling agent's tool router) when the
// caller runs in sub's runtime: the caller's supervision covers it (a
// failure past its restart intensity escalates there) and stopping the
// calling agent stops it (the calling agent's [Agent.Close] then waits
// for the call's handler, ToolOptions.OnEvent included, to return, for
// CancelGrace at most); sub's own loop is not started for it. A
// caller in another runtime delegates as a Run of sub would, on sub's
// loop, which the first conversation needing it starts (see [New]).
// A sub-agent that fails (every attempt ended with ERROR: a crash its
// restarts did not heal, the model failing), gives no final answer or
// times out makes the call's one error result, and the calling agent goes
// on. Cancelling the call (the caller's CANCEL or ABORT, its timeout, the
// caller's Run cancelled) cancels the sub-agent's conversation, ABORT
// included, so that its own tool calls are answered and stopped; so does
// sub's [Agent.Close], which does not wait for the caller: the call then
// fails with an error wrapping [ErrClosed].
// The tool's flags are derived from sub's tools ([Agent.ToolFlags]) unless
// ToolOptions.Flags sets them: a delegation to an agent that can write or
// run commands is neither read-only nor, when any of its tools is
// irreversible, reversible, so approval policies and MCP clients treat
// it as they would those tools.
func AsTool(sub *Agent, o *ToolOptions) (*tools.Tool, error) {
	if err := sub.usable(); err != nil {
		return nil, fmt.Errorf("agent: AsTool: %w", err)
	}
	var opts ToolOptions
	if o != nil {
		opts = *o
	}
	if opts.Name == "" {
		opts.Name = sub.Name()
	}
	if opts.Description == "" {
		opts.Description = fmt.Sprintf("Delegate a task to the %s agent and get its answer.", opts.Name)
	}
	if len(opts.Schema) == 0 {
		opts.Schema = DefaultToolSchema
	} else if opts.Prompt == nil {
		return nil, fmt.Errorf("agent: tool %q: a Schema of its own needs a Prompt", clip(opts.Name))
	}
	if opts.Prompt == nil {
		tool := opts.Name
		opts.Prompt = func(args json.RawMessage) ([]models.Message, error) { return taskPrompt(tool, args) }
	}
	flags := sub.ToolFlags()
	if opts.Flags != nil {
		derived := flags.Capabilities
		flags = *opts.Flags
		if len(flags.Capabilities) == 0 {
			flags.Capabilities = derived
		}
	}
	name := opts.Name
	return tools.New(tools.Definition{
		Name:            name,
		Description:     opts.Description,
		Capabilities:    flags.Capabilities,
		Transactional:   flags.Transactional,
		Irreversible:    flags.Irreversible,
		Idempotent:      flags.Idempotent,
		DiesWithProcess: flags.DiesWithProcess,
		Schema:          opts.Schema,
		Timeout:         opts.Timeout,
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			msgs, err := opts.Prompt(args)
			if err != nil {
				return nil, err
			}
			// Numbered by sub, not by tool: delegations through two tools
			// of one agent never share a session.
			session := name + "-" + sub.delegationTag + strconv.FormatUint(sub.delegations.Add(1), 10)
			// The delegation's loop is a child of the calling tool's actor.
			var (
				parent *actors.Parent
				hook   *hookSlot
				emit   func(Event)
			)
			if opts.OnEvent != nil {
				hook = &hookSlot{call: ctx}
			}
			if p, ok := actors.ParentFrom(ctx); ok {
				if p.Runtime() == sub.rt {
					parent = &p
				}
				callers := callersOf(p)
				for _, caller := range callers {
					// The caller's Close waits for this handler, once its
					// loop (and so the delegation's) has stopped; so does
					// that of each agent whose conversation waits for the
					// caller's (a delegation within a delegation). The
					// hook holds their conversations while it runs.
					defer caller.delegate(hook)()
				}
				if hook != nil {
					hook.callers = callers
				}
			}
			if hook != nil {
				emit = func(ev Event) {
					// The hook holds the delegation's conversation of sub
					// (its consumer's body) and the callers' conversations
					// waiting for it: a Close of one of them from it cannot
					// wait for them (see Agent.awaitConversations).
					hook.enter()
					defer hook.n.Add(1)
					opts.OnEvent(session, ev)
				}
			}
			ans, err := sub.run(ctx, session, msgs, parent, emit, true)
			if err != nil {
				err = fmt.Errorf("the %s agent failed: %w", name, err)
			}
			switch {
			case emit == nil:
			case err != nil:
				emit(Event{Kind: EventError, Text: err.Error(), Answer: answered(ans)})
			default:
				emit(Event{Kind: EventDone, Answer: ans})
			}
			if err != nil {
				return nil, err
			}
			return toolAnswer{Success: true, Answer: ans.Text, ToolCalls: ans.ToolCalls()}, nil
		},
	})
}

// taskPrompt is the default Prompt of the tool named tool: the "task"
// string as one user message. An empty or blank task is refused as the
// call's invalid arguments (a *tools.ArgumentsError: the model is told,
// and the sub-agent is not asked nothing).
func taskPrompt(tool string, args json.RawMessage) ([]models.Message, error) {
	var in struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, fmt.Errorf("read task: %w", err)
	}
	if strings.TrimSpace(in.Task) == "" {
		return nil, &tools.ArgumentsError{Tool: tool, Problems: []string{"/task: empty: say what the agent is to do"}}
	}
	return []models.Message{models.UserMessage(in.Task)}, nil
}

// delegationSession reports whether session names a delegation this
// Agent value started (see AsTool: the tool's name, "-", its
// delegationTag, a number). A delegation an earlier Agent on the same
// Store started has another tag and is not recognised.
func (a *Agent) delegationSession(session string) bool {
	i := strings.LastIndex(session, "-"+a.delegationTag)
	if i < 0 || a.delegationTag == "" {
		return false
	}
	n := session[i+1+len(a.delegationTag):]
	_, err := strconv.ParseUint(n, 10, 64)
	return err == nil
}

// forget deletes a delegation's session from the Store once its
// conversation has returned with err: nothing can name the session again
// (see AsTool), so it would stay there for good. A session waiting for
// approval is kept (its WaitingError names it, and Resume goes on with
// it, and forgets it once it returns not waiting). The session is deleted once its loop has stopped, which persists
// it until then: at once when it has, else by a goroutine that waits for
// it, and Close waits for that goroutine as for a drain. ctx is the
// conversation's: the delete is its work, given its values however it
// ended (see graceCtx). A delete that fails is logged to the runtime's
// logger.
func (c *conversation) forget(ctx context.Context, err error) {
	if _, waiting := errors.AsType[*WaitingError](err); waiting {
		return
	}
	a, key, mux := c.a, c.a.SessionKey(c.session), c.mux
	if mux == nil || mux.Stopped() {
		a.deleteSession(ctx, key)
		return
	}
	// The wait has no end but the loop's: a ctx of the conversation's
	// values that is never cancelled.
	ctx = context.WithoutCancel(ctx)
	a.drains.Add(1) // before leave's running.Done: Close waits for it
	go func() {
		defer a.drains.Done()
		if mux.Close(ctx) == nil { // it stops: wait until it is gone
			a.deleteSession(ctx, key)
		}
	}()
}

// deleteSession deletes the session stored under key, for CancelGrace at
// most, and logs an error. ctx is the conversation's (see graceCtx).
func (a *Agent) deleteSession(ctx context.Context, key string) {
	ctx, cancel := a.graceCtx(ctx)
	defer cancel()
	if err := tools.DeleteSession(ctx, a.opts.Store, key); err != nil {
		a.rt.Logger().Warn("agent: delete a delegation's session from the store", slog.String("agent", a.opts.Name),
			slog.String("session", clip(key)), slog.Any("error", err))
	}
}

// graceCtx returns the ctx of clean-up that belongs to the Run of ctx
// and may begin once ctx has ended (the ABORT read of a cancelled
// attempt, the stop of its own loop, the delete of a delegation's
// session): ctx's values, so that a Store or a tracer sees the Run's
// (a tenant, a trace parent), without its cancel, and CancelGrace as its
// deadline.
func (a *Agent) graceCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), a.opts.CancelGrace)
}

// hookSlot is a delegation's ToolOptions.OnEvent hook, kept by the
// agents whose conversations it holds while it runs (see
// Agent.delegate). n counts the hook's calls' beginnings and ends: it is
// odd while one runs, and a Close that saw it running tells by it
// whether that call has returned since. call is the ctx of the
// delegation's call: once it has ended (the call timed out or was
// cancelled, and so answered), the hook holds none of the callers'
// conversations, and no Close waits for it.
type hookSlot struct {
	n       atomic.Uint64
	call    context.Context
	callers []*Agent
}

// holds tells whether the hook's delegation is still waited for by its
// callers (its call has not ended).
func (h *hookSlot) holds() bool { return h.call.Err() == nil }

// enter marks a call of the hook begun and wakes a Close of a caller
// that waits, after n changed, so that a Close that looked before sees
// it (see Agent.awaitConversations).
func (h *hookSlot) enter() {
	h.n.Add(1)
	for _, a := range h.callers {
		if a.closeWaits.Load() {
			a.mu.Lock()
			a.changedLocked()
			a.mu.Unlock()
		}
	}
}
