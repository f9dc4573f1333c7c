package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// ErrLegacySession is returned by [Agent.Run], [Agent.Stream] and
// [Agent.Resume] of a durable agent when its Store holds the session
// where versions before [SessionKey] kept it, under the bare session id,
// and nothing under its key: the Run would otherwise start the
// conversation afresh. Nothing was sent or stored. Move such sessions
// with [Agent.MigrateSessions], then run them again.
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
// called again completes the move. An id under which nothing is stored
// (moved already, never stored) is skipped. An id whose key already holds
// another conversation fails with an error wrapping
// tools.ErrSessionExists, and neither session is changed. The session is
// taken while it moves: a Run of it meanwhile fails with
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
	if _, err := a.enter(ctx, id); err != nil {
		return err
	}
	defer a.leave(id, nil)
	_, err := tools.MoveSession(ctx, a.opts.Store, id, a.SessionKey(id))
	return err
}

// checkLegacy returns an error wrapping ErrLegacySession when the store
// holds nothing under the session's key and, under its bare id, a
// session that this conversation would continue (started with the same
// request). A session of another request under the bare id is not taken
// for this one: an id with a '/' can be another agent's key, and a Run
// of other messages could not have continued it anyway.
func (c *conversation) checkLegacy(ctx context.Context) error {
	a := c.a
	store := a.opts.Store
	old, ok, err := tools.ReadSession(ctx, store, c.session)
	var se *durability.StoreError
	switch {
	case errors.As(err, &se) && se.Op == durability.OpDecode:
		return nil // the bare id names something else than a session
	case err != nil:
		return fmt.Errorf("agent %q: session %q: look for it under its bare id: %w", a.opts.Name, clip(c.session), err)
	case !ok || !bytes.Equal(old.GetFirstRequest(), c.first):
		return nil
	}
	// A session under its key is resumed (what a move left under the
	// bare id is not read); one that cannot be read fails the loop.
	if _, ok, err := tools.ReadSession(ctx, store, a.SessionKey(c.session)); ok || err != nil {
		return nil
	}
	return fmt.Errorf("agent %q: session %q: %w", a.opts.Name, clip(c.session), ErrLegacySession)
}
