package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// ErrLegacySession is returned by [Agent.Run], [Agent.Stream] and
// [Agent.Resume] of a durable agent when its Store holds the session
// where versions before [SessionKey] kept it, under the bare session id,
// and nothing under its key: the Run would otherwise start the
// conversation afresh. Nothing was sent or stored. Move such sessions
// with [Agent.MigrateSessions], then run them again.
//
// A bare id that is the key of a session of this agent, or of another
// agent open on the same Store value ([SessionKey] of its name), holds
// that agent's session and is never taken for an old one. Data under the
// bare id that cannot be read fails the Run with the store's error (a
// *durability.StoreError of Op durability.OpDecode), not ErrLegacySession:
// a fresh start could lose a damaged old session.
var ErrLegacySession = errors.New("agent: the session is stored under its bare id, as versions before SessionKey kept it; move it with Agent.MigrateSessions")

// MigrateSessions moves the sessions sessionIDs of the agent's Store that
// versions before [SessionKey] stored under the bare session id (with
// the record of their calls held for approval, under the id +
// tools.ApprovalStoreSuffix) to the agent's key of each, so that Run and
// Resume find them (see [ErrLegacySession]). Those versions kept every
// agent's sessions under the bare id, so the host says which agent a
// session belongs to by calling this on that agent. A Store cannot list
// what it holds: pass the ids the host knows.
//
// Each session is moved by tools.MoveSession: written under its key, read
// back and compared, then deleted under the bare id; after a crash in
// between, Run finds it whole under one of the two, and MigrateSessions
// called again completes the move: it deletes what is left under the
// bare id once the key holds all of it (the session as it was copied, or
// as Runs have taken it on since). An id under which nothing is stored
// (moved already, never stored) is skipped. An id whose key already holds
// another conversation fails with an error wrapping
// tools.ErrSessionExists, and neither session is changed; so does one
// whose key holds a conversation that began with the same request but
// does not hold all the session under the bare id holds (two
// conversations may begin alike: say, a session the earlier version
// stored under the id after it had been moved). An id that is
// the key of a session of this agent or of another agent open on the
// same Store value (see [ErrLegacySession]) fails, and nothing is moved;
// so does one whose stored data cannot be read, which is kept. (The key
// of an agent of another process cannot be told from an old session's
// id: pass only ids the earlier version stored.) The session is taken
// while it moves: a Run of it meanwhile fails with
// [ErrSessionBusy], and MigrateSessions fails so while a Run of it runs.
// It stops at the first id that fails (an invalid one, a store error, ctx
// ending); those moved before stay moved, and calling it again with the
// same ids is safe.
func (a *Agent) MigrateSessions(ctx context.Context, sessionIDs ...string) error {
	if err := a.usable(); err != nil {
		return err
	}
	if a.opts.Store == nil {
		return fmt.Errorf("agent %q: migrate sessions: the agent has no Store", a.opts.Name)
	}
	for _, id := range sessionIDs {
		if err := a.checkSession(id); err != nil {
			return fmt.Errorf("agent %q: migrate sessions: %w", a.opts.Name, err)
		}
		if err := a.migrate(ctx, id); err != nil {
			return fmt.Errorf("agent %q: migrate session %q: %w", a.opts.Name, clip(id), err)
		}
	}
	return nil
}

// migrate moves session id, taken meanwhile.
func (a *Agent) migrate(ctx context.Context, id string) error {
	if name, session, ok := a.keyOwner(id); ok {
		return fmt.Errorf("%q is the key of session %q of agent %q, open on this Store: not a session of an earlier version; nothing moved",
			clip(id), clip(session), name)
	}
	if _, err := a.enter(ctx, id); err != nil {
		return err
	}
	defer a.leave(id, nil)
	store, key := a.opts.Store, a.SessionKey(id)
	// tools.MoveSession takes a session of the same first request under
	// the key for one it moved before a crash, and deletes the old one:
	// two conversations may begin alike. Only one that holds all the old
	// one holds is taken so.
	old, ok, err := tools.ReadSession(ctx, store, id)
	if err != nil || !ok {
		return err
	}
	there, taken, err := tools.ReadSession(ctx, store, key)
	switch {
	case err != nil:
		return err
	case taken && bytes.Equal(there.GetFirstRequest(), old.GetFirstRequest()) && !wentOn(there, old):
		return fmt.Errorf("%w: %q holds a conversation that began with the same request but is not the session stored under %q, nor went on from it; nothing moved or deleted",
			tools.ErrSessionExists, clip(key), clip(id))
	}
	_, err = tools.MoveSession(ctx, store, id, key)
	return err
}

// wentOn reports whether session to, stored under a session's key, holds
// all that session from, stored under its bare id, holds: it is from as
// MoveSession copied it, or from went on to it (a Run resumed it under
// the key), or both; from may be an earlier step of it, as the crash of
// a move that had deleted from's events and not its snapshot leaves it.
// The conversation of from (its messages) begins that of to, and the
// response from was in the middle of is the one to is in the middle of,
// or the round that follows in to: it said no more than that round, and
// its calls and results are the round's first.
func wentOn(to, from *messages.LoopSession) bool {
	n := len(from.GetMessages())
	if !bytes.Equal(to.GetFirstRequest(), from.GetFirstRequest()) || !sameParams(to.GetParams(), from.GetParams()) ||
		n > len(to.GetMessages()) || from.GetIteration() > to.GetIteration() || from.GetSteps() > to.GetSteps() {
		return false
	}
	for i, m := range from.GetMessages() {
		if !bytes.Equal(m, to.GetMessages()[i]) {
			return false
		}
	}
	done := messages.LoopPhase_LOOP_PHASE_DONE
	switch {
	case from.GetPhase() == done: // ended: to is from
		return to.GetPhase() == done && n == len(to.GetMessages()) && to.GetText() == from.GetText()
	case n == len(to.GetMessages()): // to is in the middle of from's response, or ended it without calls
		if to.GetPhase() == done {
			return len(from.GetCalls()) == 0 && strings.HasPrefix(to.GetText(), from.GetText())
		}
		if from.GetPhase() == messages.LoopPhase_LOOP_PHASE_TOOLS && to.GetPhase() != from.GetPhase() ||
			!strings.HasPrefix(to.GetText(), from.GetText()) || len(from.GetCalls()) > len(to.GetCalls()) {
			return false
		}
		for i, c := range from.GetCalls() {
			call := to.GetCalls()[i]
			f := call.GetCall()
			if !sameCall(f.GetToolCallId(), f.GetName(), f.GetPayload(), call.GetComplete(), c) || !sameResult(call.GetResult(), c.GetResult()) {
				return false
			}
		}
		return true
	}
	// to has ended from's response: its round, the assistant message and
	// one tool message per call, follows from's messages.
	var said models.Message
	if json.Unmarshal(to.GetMessages()[n], &said) != nil || said.Role != models.RoleAssistant ||
		!strings.HasPrefix(said.Content, from.GetText()) || len(from.GetCalls()) > len(said.ToolCalls) {
		return false
	}
	for i, c := range from.GetCalls() {
		if tc := said.ToolCalls[i]; !sameCall(tc.ID, tc.Name, tc.Arguments, true, c) {
			return false
		}
		if res := c.GetResult(); res != nil {
			var answer models.Message
			if n+1+i >= len(to.GetMessages()) || json.Unmarshal(to.GetMessages()[n+1+i], &answer) != nil ||
				answer.Role != models.RoleTool || answer.ToolCallID != c.GetCall().GetToolCallId() || answer.Content != string(res.GetPayload()) {
				return false
			}
		}
	}
	return true
}

// sameCall reports whether the call id, name, args (complete: they
// were) is the stored call c, or went on from it: a call whose arguments
// were still streaming in c has them at the start of args.
func sameCall(id, name string, args []byte, complete bool, c *messages.LoopCall) bool {
	from := c.GetCall()
	if id != from.GetToolCallId() || name != from.GetName() || c.GetComplete() && !complete {
		return false
	}
	fromArgs := from.GetPayload()
	if c.GetComplete() {
		// A message sends no arguments as {}.
		return cmp.Or(string(args), "{}") == cmp.Or(string(fromArgs), "{}")
	}
	return bytes.HasPrefix(args, fromArgs)
}

// sameResult reports whether the result res of a call is from, the
// stored one (nil: none yet); stream ids aside.
func sameResult(res, from *messages.Frame) bool {
	if from == nil {
		return true
	}
	return res != nil && res.GetToolCallId() == from.GetToolCallId() && bytes.Equal(res.GetPayload(), from.GetPayload()) &&
		res.IsErrorResult() == from.IsErrorResult() && res.GetMeta().GetFailureKind() == from.GetMeta().GetFailureKind()
}

// sameParams reports whether two sessions' PARAMs are the same, stream
// ids aside.
func sameParams(a, b []*messages.Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].GetName() != b[i].GetName() || !bytes.Equal(a[i].GetPayload(), b[i].GetPayload()) {
			return false
		}
	}
	return true
}

// checkLegacy returns an error wrapping ErrLegacySession when, under its
// bare id, the store holds a session that this conversation would
// continue (started with the same request). It is called only when the
// key holds no session (readStored has just read it). A
// session of another request under the bare id is not taken for this
// one, nor is the bare id when it is the key of a session of this agent
// or of another open on the Store (see keyOwner): an id with a '/' can be
// a key, and a Run of other messages could not have continued it anyway.
// Data under the bare id that cannot be read fails the Run: it may be a
// session of an earlier version, which a fresh start would lose.
//
// When the Run is to start a new conversation under the key, held calls
// that a crash left there with no session (a migration stopped after it
// had copied them, a DeleteSession stopped halfway) are deleted first,
// so that the new conversation's approval gate does not take them for
// its own.
func (c *conversation) checkLegacy(ctx context.Context) error {
	a := c.a
	store := a.opts.Store
	key := a.SessionKey(c.session)
	if _, _, owned := a.keyOwner(c.session); !owned {
		old, ok, err := tools.ReadSession(ctx, store, c.session)
		switch {
		case err != nil:
			return fmt.Errorf("agent %q: session %q: look for it under its bare id, as earlier versions stored it: %w", a.opts.Name, clip(c.session), err)
		case ok && bytes.Equal(old.GetFirstRequest(), c.first):
			return fmt.Errorf("agent %q: session %q: %w", a.opts.Name, clip(c.session), ErrLegacySession)
		}
	}
	held := key + tools.ApprovalStoreSuffix
	_, ok, err := store.GetSnapshot(ctx, held)
	if err == nil && ok {
		err = store.DeleteSnapshots(ctx, held, math.MaxInt64)
	}
	if err != nil {
		return fmt.Errorf("agent %q: session %q: clear held calls left with no session: %w", a.opts.Name, clip(c.session), err)
	}
	return nil
}
