package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"

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
// [ErrSessionBusy], and MigrateSessions fails so while a Run of it runs;
// when the session's last Run returned while its loop was still stopping,
// it waits for that loop to stop first (bounded by ctx and Close).
// It stops at the first id that fails (an invalid one, a store error, ctx
// ending); those moved before stay moved, and calling it again with the
// same ids is safe.
func (a *Agent) MigrateSessions(ctx context.Context, sessionIDs ...string) error {
	if err := a.usable(); err != nil {
		return err
	}
	if a.opts.Store == nil {
		return fmt.Errorf("agent %q: migrate sessions: the agent has no Store", clip(a.opts.Name))
	}
	for _, id := range sessionIDs {
		if err := a.checkSession(id); err != nil {
			return fmt.Errorf("agent %q: migrate sessions: %w", clip(a.opts.Name), err)
		}
		if err := a.migrate(ctx, id); err != nil {
			return fmt.Errorf("agent %q: migrate session %q: %w", clip(a.opts.Name), clip(id), err)
		}
	}
	return nil
}

// migrate moves session id, taken meanwhile. No loop of the session may
// run beside the move (see tools.MoveSession): it waits first, as a Run
// does, for the own loop of the session's last Run when that Run
// returned while the loop was still stopping (see
// conversation.awaitEarlier), bounded by ctx and Close; a wait that ends
// first leaves that loop to the next Run, migration or Close.
func (a *Agent) migrate(ctx context.Context, id string) error {
	if name, session, ok := a.keyOwner(id); ok {
		return fmt.Errorf("%q is the key of session %q of agent %q, open on this Store: not a session of an earlier version; nothing moved",
			clip(id), clip(session), clip(name))
	}
	if _, err := a.enter(ctx, id, nil); err != nil {
		return err
	}
	c := &conversation{a: a, session: id}
	defer func() { a.leave(id, nil, nil, c.mux) }()
	if err := c.awaitEarlier(ctx); err != nil {
		return err
	}
	_, err := tools.MoveSession(ctx, a.opts.Store, id, a.SessionKey(id))
	return err
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
			return fmt.Errorf("agent %q: session %q: look for it under its bare id, as earlier versions stored it: %w", clip(a.opts.Name), clip(c.session), err)
		case ok && bytes.Equal(old.GetFirstRequest(), c.first):
			return fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), ErrLegacySession)
		}
	}
	held := key + tools.ApprovalStoreSuffix
	_, ok, err := store.GetSnapshot(ctx, held)
	if err == nil && ok {
		err = store.DeleteSnapshots(ctx, held, math.MaxInt64)
	}
	if err != nil {
		return fmt.Errorf("agent %q: session %q: clear held calls left with no session: %w", clip(a.opts.Name), clip(c.session), err)
	}
	return nil
}
