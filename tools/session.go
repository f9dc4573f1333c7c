package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/internal/clip"
	"github.com/polyweave/polyweave-go/messages"
)

// FailureInterrupted is the failure kind of the result a resumed session
// gives a call that was interrupted (mid-stream or mid-execution) when the
// session stopped, and that is not run again.
const FailureInterrupted FailureKind = "interrupted"

// MetaSession is the name of the META frame a loop emits when it resumes
// a session; its payload is a [SessionEvent].
const MetaSession = "session"

// SessionOptions make a tool loop's conversation resumable: the session
// is persisted step by step, and a loop started later with the same ID
// and store (after a crash, a restart, or in a new process) continues it.
// Options are copied.
//
// # What is persisted
//
// A session is event-sourced, like the durable router: each step is a
// small event (messages.LoopStarted, LoopText, LoopCallStarted, LoopArgs,
// LoopCallSurfaced, LoopCallResult, LoopToolsStarted, LoopRoundEnded,
// LoopAnswered, LoopRequestSent) written under ID through a
// durability.Provider, and one apply step turns events into the session's
// state, live and when a loop loads the session. A messages.LoopSession
// snapshot of that state (the request that started the session, its
// PARAMs, the messages so far, the tool rounds done, and the current
// response: its text and its calls, complete or still streaming, with
// their results) is written now and then as compaction: after at least
// SnapshotEvery events, and once the events written since the last
// snapshot are at least as large as it, so that snapshots cost, in total,
// no more than the events. The store drops the events a snapshot covers.
//
// A step that makes the loop act (the request goes to the model, a call
// is handed to the consumer and runs, a result arrives, a round ends, the
// final answer is given) is durable before the loop acts on it. Text and
// argument chunks make the loop do nothing but remember them, so they are
// written with the next step's events, or once more than BufferBytes of
// them are waiting: a streamed argument costs O(its size) in the store,
// not one write of the whole conversation per chunk, and one of
// BufferBytes or less is written with the step that completes its call. The events of one step go to
// the store in one write.
//
// # Starting and resuming
//
// A loop with a Session runs one conversation at a time: the first
// request it receives starts the session (a request on another stream
// while it is running ends that stream with ERROR and END). To resume, the
// caller starts a loop with the same ID and store and sends the same first
// request again (the same "messages" payload, byte for byte; a different
// one is refused with ERROR and END: use a new ID for a new
// conversation). The loop then ignores the request's PARAMs and continues
// from the stored state, on the caller's stream:
//
//   - a request the model was answering with no tool call seen yet is
//     sent again;
//   - otherwise the calls of the interrupted response are emitted as
//     TOOL_CALL frames and answered: a call that completed keeps its
//     stored result and is NEVER run again; a call the caller had
//     cancelled is answered as cancelled (see below); a call that was
//     still streaming or running gets an error result of kind
//     [FailureInterrupted], unless its tool is Idempotent and its
//     arguments were complete, in which case it runs (again); a call
//     that waited for approval (LoopOptions.Approval) waits again, or
//     gets the answer given before the stop; then the follow-up request
//     goes to the model and the loop carries on to a final answer. A
//     META frame named [MetaSession] says what was reused, run again,
//     interrupted, cancelled and held, by tool-call id. A call
//     interrupted while it was streamed is sent back to the model with
//     the argument bytes that were stored, exactly;
//   - a session the caller cancelled (CANCEL or ABORT on its stream)
//     resumes like the others, whenever the cancel came: while the
//     model answered, while the calls ran, or just before the loop
//     stopped. The cancel is stored before the loop acts on it, and a
//     cancelled round does not end the session (its stream ends, with
//     the results and END, or ERROR and END), except the round past
//     MaxIterations: that one ends the session as any last round does,
//     however the model ended its response. Resumed, each call of the
//     cancelled response gets exactly one result, the one the caller
//     saw: its stored result when it had completed, else
//     [FailureCancelled] (as the tool or the loop answers a cancelled
//     call; one cut short while it was streamed, or one held for
//     approval, says so), and it is
//     never run again, even Idempotent, nor held for approval again;
//     then the follow-up request goes to the model and the loop carries
//     on to a final answer. A CANCEL of the stream and an ABORT cover
//     every call of the response; a CANCEL naming a call covers that
//     call, and, while the model was still answering, every complete
//     call of the response (the loop runs none of them). A response the
//     model had ended without a call is the final answer all the same.
//     A CANCEL or ABORT on the resuming stream before its request's END
//     counts as one before the stop: it is stored, and the resume answers
//     the calls it covers as cancelled and runs none of them; the stream
//     then ends after the calls' results, or, with no call to answer (a
//     CANCEL of the stream, an ABORT), at once, with nothing sent to the
//     model; the session stays resumable;
//   - a session that had already ended answers with its final text and
//     END, without asking the model.
//
// A loop restarted by its supervisor reloads the session from the store;
// the stream open at the failure was closed with ERROR and END, and the
// caller resumes by sending the first request again. A loop that stayed up
// while the stream failed (the model answered ERROR) resumes the same way,
// from the step it last persisted; when that ERROR answered a CANCEL or
// ABORT, the step holds the cancelled results the caller got, which the
// resumed session gives again.
//
// # Failures
//
// A store failure fails the loop actor with the *durability.StoreError
// (errors.As): calls already surfaced get error results (cancelled ones
// when a stored cancel of the caller covers them, as a resume answers
// them) and the stream ends with ERROR and END. A failure of the write
// that stores a CANCEL or ABORT itself loses that cancel: the calls get
// stopped results ([FailureStopped]), and a resume runs or interrupts
// them as after any stop (an Idempotent call runs again). Stored data the loop
// cannot read fails it the same way (a StoreError with Op
// durability.OpDecode). Snapshots written by earlier versions, which
// wrote a bare messages.LoopSession per step, load as the state they
// hold, and sessions stored before cancels were stored (without
// messages.LoopCancelled) load as sessions not cancelled.
type SessionOptions struct {
	// ID names the session in the store (it is the store's actor name);
	// required, valid UTF-8 (the session's events hold it as a protobuf
	// string), of [MaxSessionIDLen] bytes at most.
	ID string
	// Store keeps the session; required. The caller owns and closes it.
	Store durability.Store
	// Timeout bounds each store call; zero means none.
	Timeout time.Duration
	// SnapshotEvery is the least number of events between snapshots; zero
	// means [DefaultSessionSnapshotEvery].
	SnapshotEvery int
	// BufferBytes is how much text and argument data may wait for the
	// next step before it is written anyway; zero means
	// [DefaultSessionBufferBytes]. Less writes a long streamed argument
	// in more, smaller pieces (a resumed session then sends back more of
	// a call interrupted mid-stream); more holds more in memory.
	BufferBytes int
}

// MaxSessionIDLen bounds the length of [SessionOptions].ID in bytes: the
// session is kept under its ID, and the record of its calls held for
// approval under the ID and [ApprovalStoreSuffix], a name that must fit
// durability.MaxNameLen, the longest every store of the module takes, so
// that a session stored in one store fits any other, and the record of
// its held calls fits wherever the session does. [NewLoop], and
// [MoveSession] of its target, refuse a longer ID up front, with an
// error wrapping durability.ErrInvalidName; [ReadSession] and
// [MoveSession] of its source take one, so that a session a store holds
// under it (boltstore takes longer names, and earlier versions kept
// sessions so) is read and moved to an ID that fits.
const MaxSessionIDLen = durability.MaxNameLen - len(ApprovalStoreSuffix)

// ClipID shortens a session id, or another id or name a session's
// records hold (a call's, an agent's, a key), for an error message,
// which quotes it: past 64 bytes, it keeps the whole characters of the
// first 64 and says the length. It never cuts a UTF-8 character in two
// (%q would quote the bytes of its half as escapes); a byte that is not
// UTF-8 counts as one. Ids run to a thousand bytes.
func ClipID(id string) string {
	p, clipped := clip.Prefix(id, 64)
	if !clipped {
		return id
	}
	return fmt.Sprintf("%s…(%d bytes)", p, len(id))
}

// DefaultSessionSnapshotEvery is the session snapshot interval when
// [SessionOptions].SnapshotEvery is zero.
const DefaultSessionSnapshotEvery = 100

// DefaultSessionBufferBytes is [SessionOptions].BufferBytes when zero:
// a streamed argument of 1 MiB or less is written in one piece, with the
// step that completes it.
const DefaultSessionBufferBytes = 1 << 20

// validate checks the options of a loop that keeps the session (see
// validateRead), and that its ID fits every store ([MaxSessionIDLen]).
func (o *SessionOptions) validate() error {
	if err := idFits(o.ID); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return o.validateRead()
}

// idFits returns an error wrapping durability.ErrInvalidName when a
// session kept under id, or the record of its held calls, would not fit
// every store (see [MaxSessionIDLen]).
func idFits(id string) error {
	if len(id) <= MaxSessionIDLen {
		return nil
	}
	return fmt.Errorf("id of %d bytes: %w: the session's calls held for approval are kept under the id and %q, %d bytes, more than the %d every store takes (durability.MaxNameLen): an id takes up to %d bytes",
		len(id), durability.ErrInvalidName, ApprovalStoreSuffix, len(id)+len(ApprovalStoreSuffix), durability.MaxNameLen, MaxSessionIDLen)
}

// validateRead checks the options and sets the defaults, but for the
// ID's length: a session a store holds under a longer ID (boltstore
// takes one, and earlier versions kept sessions so) is still read, and
// moved to one that fits ([MoveSession]).
func (o *SessionOptions) validateRead() error {
	switch {
	case o.ID == "":
		return errors.New("session: empty id")
	case !utf8.ValidString(o.ID):
		// The session's events hold it as a protobuf string: the loop's
		// first write would fail.
		return fmt.Errorf("session: id %q: %w: it is not valid UTF-8", ClipID(o.ID), durability.ErrInvalidName)
	case o.Store == nil:
		return errors.New("session: nil store")
	case o.Timeout < 0:
		return fmt.Errorf("session: negative timeout %v", o.Timeout)
	case o.SnapshotEvery < 0:
		return fmt.Errorf("session: snapshot interval %d, want >= 1 (0 for the default)", o.SnapshotEvery)
	case o.BufferBytes < 0:
		return fmt.Errorf("session: negative buffer size %d", o.BufferBytes)
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = DefaultSessionSnapshotEvery
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = DefaultSessionBufferBytes
	}
	return nil
}

// sessionState is the durable side of a loop with a Session, for one
// incarnation of the loop actor.
type sessionState struct {
	opts       SessionOptions
	idempotent map[string]bool
	// diesWithProcess names the tools whose running calls certainly
	// stopped when the process did (Definition.DiesWithProcess).
	diesWithProcess map[string]bool
	log             *sessionLog
	active          string // the stream running the session
}

// sessionLog writes a session's events and snapshots through a
// durability.Provider and keeps the record they make. Events wait in buf
// until a step makes the loop act (or the text and argument data in buf
// pass flushAt);
// then they are persisted in one write and applied to rec, so rec is
// always exactly what the store holds.
type sessionLog struct {
	id      string
	store   durability.Store
	prov    *durability.Provider
	timeout time.Duration
	every   int
	flushAt int // bytes waiting that make a write

	rec   sessionRecord
	index uint64 // of the next event

	buf      []proto.Message
	bufBytes int
	// dataBytes is the text and argument data in buf: what BufferBytes
	// bounds (the events around it are small and go with the next step).
	dataBytes int
	// Since the last snapshot (or the load): events and their size.
	sinceSnap, bytesSinceSnap, snapSize int
}

// provider returns the provider sessions with these options write
// through (it is safe for concurrent use: one serves every incarnation).
func (o *SessionOptions) provider() (*durability.Provider, error) {
	return durability.NewProvider(o.Store, &durability.ProviderOptions{Timeout: o.Timeout})
}

func newSessionLog(o SessionOptions, prov *durability.Provider) *sessionLog {
	return &sessionLog{id: o.ID, store: o.Store, prov: prov, timeout: o.Timeout, every: o.SnapshotEvery, flushAt: o.BufferBytes}
}

// SessionEvent is the payload of the META frame named [MetaSession] a
// loop emits when it resumes a session: the calls answered with their
// stored results (Reused), run again, interrupted, answered as cancelled
// by the caller's cancel, and waiting for approval again, by tool-call
// id.
type SessionEvent struct {
	Event       string   `json:"event"`
	SessionID   string   `json:"session_id"`
	Iteration   int      `json:"iteration"`
	Reused      []string `json:"reused,omitempty"`
	Rerun       []string `json:"rerun,omitempty"`
	Interrupted []string `json:"interrupted,omitempty"`
	// Cancelled are the calls the caller cancelled (CANCEL or ABORT)
	// before the session stopped, answered as cancelled and not run.
	Cancelled []string `json:"cancelled,omitempty"`
	// Held are the calls that wait for approval again (ApprovalOptions).
	Held []string `json:"held,omitempty"`
	// Unapproved are calls that waited for approval when the session
	// stopped, resumed by a loop without an approval policy: they are
	// answered as not run ([FailureDenied]), never run.
	Unapproved []string `json:"unapproved,omitempty"`
}

func (sl *sessionLog) context() (context.Context, context.CancelFunc) {
	if sl.timeout > 0 {
		return context.WithTimeout(context.Background(), sl.timeout)
	}
	return context.Background(), func() {}
}

// ReadSession returns the state of session id as stored in store, the
// state a loop resuming it starts from (read through the loop's own apply
// step), and ok false, with a nil error, when the store holds no such
// session. Its Steps is the number of events stored for it. Stored data
// that cannot be read is a *durability.StoreError with Op
// durability.OpDecode.
func ReadSession(ctx context.Context, store durability.Store, id string) (st *messages.LoopSession, ok bool, err error) {
	o := SessionOptions{ID: id, Store: store}
	if err := o.validateRead(); err != nil {
		return nil, false, fmt.Errorf("read session: %w", err)
	}
	prov, err := o.provider()
	if err != nil {
		return nil, false, fmt.Errorf("read session: %w", err)
	}
	sl := newSessionLog(o, prov)
	if err := sl.loadContext(ctx); err != nil {
		return nil, false, fmt.Errorf("read session %q: %w", ClipID(id), err)
	}
	if !sl.rec.started {
		return nil, false, nil
	}
	return proto.CloneOf(sl.rec.state(id, sl.index)), true, nil
}

// DeleteSession removes everything store holds of session id: its events
// and snapshots, and the record of its calls held for approval (see
// [ApprovalStoreSuffix]). A host calls it for a session that has ended
// (or that it gives up), once no loop runs it; a store that compacts its
// file then reclaims the space. Deleting a session the store does not
// hold is not an error.
func DeleteSession(ctx context.Context, store durability.Store, id string) error {
	if id == "" {
		return errors.New("delete session: empty id")
	}
	// Every index a session writes is an int (it goes through a
	// durability.Provider), so MaxInt64 covers them all.
	for _, name := range []string{id, id + ApprovalStoreSuffix} {
		if err := store.DeleteEvents(ctx, name, math.MaxInt64); err != nil {
			return fmt.Errorf("delete session %q: %w", ClipID(id), err)
		}
		if err := store.DeleteSnapshots(ctx, name, math.MaxInt64); err != nil {
			return fmt.Errorf("delete session %q: %w", ClipID(id), err)
		}
	}
	return nil
}

// ErrSessionExists is returned by [MoveSession] when the key a session
// is moved to holds another conversation (one started with another
// request, or one that began with the same request but is neither the
// session moved nor went on from it): neither is changed.
var ErrSessionExists = errors.New("move session: the target holds another session")

// MoveSession moves session from of store to the key to, with the record
// of its calls held for approval (from + [ApprovalStoreSuffix] to to +
// ApprovalStoreSuffix), for a host that renames where its sessions are
// kept. The session is written under to as one snapshot of its state (the
// state [ReadSession] returns, which a loop resuming it starts from: its
// stored results, cancels and held calls are kept), read back and
// compared, and only then deleted under from. moved reports whether this
// call completed a move; it is false, with a nil error, when from holds
// no session (never stored, or moved already). No loop may run either
// session meanwhile. A move onto the record of its own held calls (to is
// from + ApprovalStoreSuffix, or from is to + ApprovalStoreSuffix) is
// refused: the two sessions would share a name.
//
// Each write is atomic and the session appears under to in one write,
// after its held calls, so that after a crash at any point a loop (or
// ReadSession) finds the session whole: under from while to holds none,
// under to once it does. Calling MoveSession again then completes the
// move: when to holds the session (all that from holds: the same
// messages, then what a loop resuming it under to went on to do), what
// is left under from is deleted, as nothing reads it any more; another
// session under to fails with [ErrSessionExists] and changes nothing,
// also one that began with the same request (two conversations may
// begin alike). A crash between the two writes
// leaves the held calls under to + ApprovalStoreSuffix with no session
// under to: a host that starts another conversation under to instead
// deletes them first (the agent package does), or its approval gate
// would take them for its own.
func MoveSession(ctx context.Context, store durability.Store, from, to string) (moved bool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("move session %q to %q: %w", ClipID(from), ClipID(to), err)
		}
	}()
	switch {
	case from == "" || to == "":
		return false, errors.New("empty id")
	case from == to:
		return false, errors.New("same id")
	case to == from+ApprovalStoreSuffix:
		// Written there, the session would be deleted with the held calls
		// of from.
		return false, errors.New("the target is where the session keeps its calls held for approval")
	case from == to+ApprovalStoreSuffix:
		return false, errors.New("the session is where the target would keep its calls held for approval")
	case store == nil:
		return false, errors.New("nil store")
	}
	if err := idFits(to); err != nil {
		return false, fmt.Errorf("the target's %w", err)
	}
	st, ok, err := ReadSession(ctx, store, from)
	if err != nil || !ok {
		return false, err
	}
	there, taken, err := ReadSession(ctx, store, to)
	switch {
	case err != nil:
		return false, err
	case taken && !bytes.Equal(there.GetFirstRequest(), st.GetFirstRequest()):
		return false, ErrSessionExists
	case taken && !wentOn(there, st):
		return false, fmt.Errorf("%w: it began with the same request, but is neither this session nor went on from it; nothing moved or deleted", ErrSessionExists)
	case taken: // moved before a crash: what is left under from is not read
		return true, deleteMoved(ctx, store, from)
	}
	held, ok, err := store.GetSnapshot(ctx, from+ApprovalStoreSuffix)
	if err != nil {
		return false, err
	}
	if ok {
		if err := store.PersistSnapshot(ctx, to+ApprovalStoreSuffix, held.Index, held.Data); err != nil {
			return false, err
		}
	}
	st.SessionId = to
	packed, err := anypb.New(st)
	if err != nil {
		return false, err
	}
	data, err := proto.Marshal(packed)
	if err != nil {
		return false, err
	}
	if err := store.PersistSnapshot(ctx, to, st.GetSteps(), data); err != nil {
		return false, err
	}
	if back, ok, err := ReadSession(ctx, store, to); err != nil || !ok || !proto.Equal(back, st) {
		// Not what was written: the session stays under from alone.
		if err == nil {
			err = errors.New("the copy reads back otherwise")
		}
		return false, errors.Join(err, DeleteSession(ctx, store, to))
	}
	return true, deleteMoved(ctx, store, from)
}

// deleteMoved deletes session id once it was moved: the held calls
// first, then the events, then the snapshots, so that what a crash
// leaves of it reads as the same conversation or not at all.
func deleteMoved(ctx context.Context, store durability.Store, id string) error {
	held := id + ApprovalStoreSuffix
	for _, step := range []func() error{
		func() error { return store.DeleteSnapshots(ctx, held, math.MaxInt64) },
		func() error { return store.DeleteEvents(ctx, held, math.MaxInt64) },
		func() error { return store.DeleteEvents(ctx, id, math.MaxInt64) },
		func() error { return store.DeleteSnapshots(ctx, id, math.MaxInt64) },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("delete the moved session: %w", err)
		}
	}
	return nil
}

// load reads the stored session (its snapshot, then the events after it)
// into rec, replacing what rec held.
func (sl *sessionLog) load() error {
	ctx, cancel := sl.context()
	defer cancel()
	return sl.loadContext(ctx)
}

func (sl *sessionLog) loadContext(ctx context.Context) error {
	sl.rec, sl.index, sl.buf, sl.bufBytes, sl.dataBytes = sessionRecord{}, 0, sl.buf[:0], 0, 0
	sl.sinceSnap, sl.bytesSinceSnap, sl.snapSize = 0, 0, 0
	snap, ok, err := sl.store.GetSnapshot(ctx, sl.id)
	if err != nil {
		return err
	}
	if ok {
		st, err := sl.decodeSnapshot(snap.Data)
		if err != nil {
			return &durability.StoreError{Op: durability.OpDecode, Name: sl.id, Err: fmt.Errorf("snapshot at %d: %w", snap.Index, err)}
		}
		sl.rec.apply(st)
		sl.index, sl.snapSize = snap.Index, len(snap.Data)
	}
	return sl.store.GetEvents(ctx, sl.id, sl.index, 0, func(index uint64, data []byte) error {
		if index != sl.index {
			return &durability.StoreError{Op: durability.OpDecode, Name: sl.id,
				Err: fmt.Errorf("event %d missing (next stored: %d)", sl.index, index)}
		}
		msg, err := sl.prov.Decode(data)
		if err == nil && !sl.rec.apply(msg) {
			err = fmt.Errorf("%s is not a session event", msg.ProtoReflect().Descriptor().FullName())
		}
		if err != nil {
			return &durability.StoreError{Op: durability.OpDecode, Name: sl.id, Err: fmt.Errorf("event %d: %w", index, err)}
		}
		sl.index++
		sl.sinceSnap++
		sl.bytesSinceSnap += len(data)
		return nil
	})
}

// decodeSnapshot decodes a stored snapshot: a messages.LoopSession in the
// Provider's encoding, or, as earlier versions stored it, bare.
func (sl *sessionLog) decodeSnapshot(data []byte) (*messages.LoopSession, error) {
	msg, err := sl.prov.Decode(data)
	if err == nil {
		st, ok := msg.(*messages.LoopSession)
		if !ok {
			return nil, fmt.Errorf("%s is not a session snapshot", msg.ProtoReflect().Descriptor().FullName())
		}
		return st, nil
	}
	var old messages.LoopSession
	if proto.Unmarshal(data, &old) == nil && old.GetSessionId() == sl.id && len(old.GetFirstRequest()) > 0 {
		return &old, nil
	}
	return nil, err
}

// add queues e for the next write; text joins the queued text right
// before it. (Argument chunks are joined before they become events, by
// recordArgs: a LoopArgs reaches add only when it starts a new run.)
func (sl *sessionLog) add(e proto.Message) {
	var size int
	switch m := e.(type) {
	case *messages.LoopArgs:
		size = len(m.GetChunk())
		sl.dataBytes += size
	case *messages.LoopText:
		size = len(m.GetText())
		sl.dataBytes += size
		if n := len(sl.buf); n > 0 {
			if last, ok := sl.buf[n-1].(*messages.LoopText); ok {
				last.Text += m.GetText()
				sl.bufBytes += size
				return
			}
		}
	default:
		size = proto.Size(e)
	}
	sl.buf = append(sl.buf, e)
	sl.bufBytes += size + 16
}

// full reports whether the text and argument data waiting pass flushAt:
// data up to flushAt waits for the step that makes the loop act on it (a
// streamed argument of flushAt bytes or less is written with the step
// that completes its call, in the same store write). The other events
// waiting are bounded by flushAt too.
func (sl *sessionLog) full() bool {
	return sl.dataBytes > sl.flushAt || sl.bufBytes-sl.dataBytes > sl.flushAt
}

// flush persists the queued events in one write, applies them to rec,
// and snapshots when due. A store failure panics with a
// *durability.StoreError (see durability.Provider).
func (sl *sessionLog) flush() {
	if len(sl.buf) == 0 {
		return
	}
	if sl.index > math.MaxInt-uint64(len(sl.buf)) {
		panic(&durability.StoreError{Op: durability.OpPersistEvent, Name: sl.id, Err: durability.ErrIndexOverflow})
	}
	sl.prov.PersistEvents(sl.id, int(sl.index), sl.buf)
	for _, e := range sl.buf {
		sl.rec.apply(e)
	}
	sl.index += uint64(len(sl.buf))
	sl.sinceSnap += len(sl.buf)
	sl.bytesSinceSnap += sl.bufBytes
	clear(sl.buf)
	sl.buf, sl.bufBytes, sl.dataBytes = sl.buf[:0], 0, 0
	if sl.sinceSnap >= sl.every && sl.bytesSinceSnap >= sl.snapSize {
		st := sl.rec.state(sl.id, sl.index)
		sl.prov.PersistSnapshot(sl.id, int(sl.index), st)
		sl.sinceSnap, sl.bytesSinceSnap, sl.snapSize = 0, 0, proto.Size(st)
	}
}

// drop forgets the queued events (the stream failed: the stored session
// stays as it was).
func (sl *sessionLog) drop() {
	clear(sl.buf)
	sl.buf, sl.bufBytes, sl.dataBytes = sl.buf[:0], 0, 0
}

// load reads the stored session, at the start of an incarnation.
func (ss *sessionState) load(c actors.Context) {
	if err := ss.log.load(); err != nil {
		c.Fail(fmt.Errorf("load session %q: %w", ClipID(ss.opts.ID), err))
	}
}

// record queues e for the stream's session, to be written with the next
// step (text and argument chunks: they make the loop do nothing yet).
func (ss *sessionState) record(c actors.Context, s *loopSession, e proto.Message) {
	if s.stream != ss.active {
		return
	}
	ss.log.add(e)
	if ss.log.full() {
		ss.write(c)
	}
}

// recordArgs queues an argument chunk of call id: record of a LoopArgs,
// joined into the queued one of the same call without an event of its
// own (the hot path of a streamed argument).
func (ss *sessionState) recordArgs(c actors.Context, s *loopSession, id, chunk string) {
	if s.stream != ss.active {
		return
	}
	sl := ss.log
	if n := len(sl.buf); n > 0 {
		if last, ok := sl.buf[n-1].(*messages.LoopArgs); ok && last.GetToolCallId() == id {
			last.Chunk = appendDoubling(last.Chunk, chunk)
			sl.bufBytes += len(chunk)
			sl.dataBytes += len(chunk)
			if sl.full() {
				ss.write(c)
			}
			return
		}
	}
	ss.record(c, s, &messages.LoopArgs{ToolCallId: id, Chunk: []byte(chunk)})
}

// appendDoubling appends chunk to b, doubling b's room when it is short:
// a long argument waiting in a LoopArgs is copied about once more as it
// grows, instead of about four times more (append grows large slices by
// a quarter).
func appendDoubling(b []byte, chunk string) []byte {
	if need := len(b) + len(chunk); need > cap(b) {
		b = append(make([]byte, 0, max(need, 2*cap(b))), b...)
	}
	return append(b, chunk...)
}

// commit persists the events of a step (after anything queued), before
// the loop acts on it.
func (ss *sessionState) commit(c actors.Context, s *loopSession, events ...proto.Message) {
	if s.stream != ss.active {
		return
	}
	for _, e := range events {
		ss.log.add(e)
	}
	ss.write(c)
	if ss.log.rec.phase == messages.LoopPhase_LOOP_PHASE_DONE {
		ss.active = ""
	}
}

// release writes the events waiting for s's session and lets the session
// go: the stream ends, and the stored session stays resumable from there.
func (ss *sessionState) release(c actors.Context, s *loopSession) {
	if s.stream != ss.active {
		return
	}
	ss.write(c)
	ss.active = ""
}

// write flushes the log; a store failure fails the loop actor.
func (ss *sessionState) write(c actors.Context) {
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(*durability.StoreError); ok {
				ss.log.drop()
				c.Fail(fmt.Errorf("persist session %q: %w", ClipID(ss.opts.ID), se))
			}
			panic(r)
		}
	}()
	ss.log.flush()
}

// admit decides what the first request of stream s starts, given its
// "messages" payload: a new session (true), or nothing for now (false):
// the request is held back (a resume, run at its END) or refused.
func (ss *sessionState) admit(c actors.WrapperContext, l *loopLogic, s *loopSession, payload []byte) bool {
	if ss.active != "" && ss.active != s.stream {
		s.hold = true
		l.fail(c, s, fmt.Sprintf("tool loop: session %q is busy on another stream", ClipID(ss.opts.ID)), "", false)
		return false
	}
	if !ss.log.rec.started {
		ss.active = s.stream
		s.first = bytes.Clone(payload)
		return true
	}
	s.hold = true
	st := ss.log.rec.state(ss.opts.ID, ss.log.index)
	if !bytes.Equal(st.GetFirstRequest(), payload) {
		l.fail(c, s, fmt.Sprintf("tool loop: session %q was started with a different request; use a new session id for a new conversation", ClipID(ss.opts.ID)), FailureSessionConflict, false)
		return false
	}
	ss.active = s.stream
	s.resume = st
	return false
}

// restamp returns f on stream (a copy when it was on another).
func restamp(f *messages.Frame, stream string) *messages.Frame {
	if f == nil || f.GetStreamId() == stream {
		return f
	}
	cp := messages.CloneFrame(f)
	cp.StreamId = stream
	return cp
}

// resume continues the stored session st on stream s, at the END of the
// caller's repeated first request.
func (l *loopLogic) resume(c actors.WrapperContext, s *loopSession, st *messages.LoopSession) {
	ss := l.sess
	s.first = st.GetFirstRequest()
	s.params = s.params[:0]
	for _, p := range st.GetParams() {
		s.params = append(s.params, restamp(p, s.stream))
	}
	s.messages = make([]json.RawMessage, len(st.GetMessages()))
	for i, m := range st.GetMessages() {
		s.messages[i] = m
	}
	s.iteration = int(st.GetIteration())
	s.injected = true
	s.text.Reset()
	ev := SessionEvent{Event: "resumed", SessionID: ss.opts.ID, Iteration: s.iteration}

	switch {
	case st.GetPhase() == messages.LoopPhase_LOOP_PHASE_DONE:
		if st.GetText() != "" {
			c.ToOuter(messages.Text(s.stream, st.GetText()))
		}
		ss.active = ""
		c.ToOuter(messages.End(s.stream))
		l.drop(s)
		return
	case len(st.GetCalls()) == 0:
		l.emitSession(c, s, ev)
		if s.stopped { // the caller stopped the stream before its END: no request goes out
			ss.active = "" // the stored session stays resumable
			c.ToOuter(s.end())
			l.forget(s)
			return
		}
		s.phase = phaseModel
		ss.commit(c, s, &messages.LoopRequestSent{})
		l.sendRequest(c, s, nil)
		return
	}

	midStream := st.GetPhase() == messages.LoopPhase_LOOP_PHASE_MODEL
	cancel := st.GetCancel() // the caller's, before the stop
	s.text.WriteString(st.GetText())
	s.thinking = st.GetThinking()
	var rerun []*turnCall
	var events []proto.Message // the interrupted calls' results, then the calls start
	var discard []string       // held calls answered here: forgotten once their results are stored
	held := l.d.gate           // what holds calls for approval, or reads what a loop with a policy held
	if held == nil {
		held = heldRecord(&ss.opts)
	}
	for _, lc := range st.GetCalls() {
		tc := &turnCall{call: restamp(lc.GetCall(), s.stream)}
		id := tc.call.GetToolCallId()
		switch {
		case lc.GetResult() != nil:
			tc.result = restamp(lc.GetResult(), s.stream)
			ev.Reused = append(ev.Reused, id)
		case cancels(cancel, id, lc.GetComplete(), !midStream): // never run, even if idempotent
			if held.awaiting(c, id) { // it waits no more, answered as the gate answers it
				tc.result = errorResult(tc.call, FailureCancelled, heldCancelled)
				discard = append(discard, id)
			} else {
				tc.result = cancelledResult(tc.call, cancel.GetAborted(), lc.GetComplete())
			}
			ev.Cancelled = append(ev.Cancelled, id)
			if lc.GetComplete() {
				events = append(events, &messages.LoopCallResult{Result: tc.result})
			} else {
				events = append(events, &messages.LoopCallSurfaced{ToolCallId: id, Result: tc.result})
			}
		case lc.GetComplete() && l.d.gate == nil && held.awaiting(c, id):
			// Held before the stop, and no policy now to ask: never run (even
			// if idempotent), and not interrupted, since it never started.
			tc.result = errorResult(tc.call, FailureDenied, unapprovedMessage(tc.call.GetName()))
			discard = append(discard, id)
			ev.Unapproved = append(ev.Unapproved, id)
			events = append(events, &messages.LoopCallResult{Result: tc.result})
		case lc.GetComplete() && l.d.gate.awaiting(c, id): // held again, or its stored answer applied
			rerun = append(rerun, tc)
			ev.Held = append(ev.Held, id)
		case lc.GetComplete() && ss.idempotent[tc.call.GetName()]:
			rerun = append(rerun, tc)
			ev.Rerun = append(ev.Rerun, id)
		default:
			tc.result = errorResult(tc.call, FailureInterrupted, interruptedMessage(tc.call.GetName(), midStream, ss.diesWithProcess[tc.call.GetName()]))
			ev.Interrupted = append(ev.Interrupted, id)
			if lc.GetComplete() {
				events = append(events, &messages.LoopCallResult{Result: tc.result})
			} else { // still streaming: handed out now, with the stored arguments
				events = append(events, &messages.LoopCallSurfaced{ToolCallId: id, Result: tc.result})
			}
		}
		s.calls = append(s.calls, tc)
	}
	l.emitSession(c, s, ev)
	for _, tc := range s.calls {
		c.ToOuter(tc.call)
	}
	s.phase = phaseTools
	ss.commit(c, s, append(events, &messages.LoopToolsStarted{Thinking: s.thinking})...)
	for _, id := range discard {
		held.discard(c, id)
	}
	s.dispatching = true
	for _, tc := range rerun {
		l.d.run(c, tc.call)
	}
	s.dispatching = false
	l.maybeFinishRound(c, s)
}

func interruptedMessage(tool string, midStream, stopped bool) string {
	if midStream {
		return fmt.Sprintf("Tool call %s was interrupted: the session stopped while the call was being streamed; it was not run", tool)
	}
	if stopped {
		return fmt.Sprintf("Tool call %s was interrupted: the session stopped while it was running and the call was "+
			"certainly stopped with it (it dies with its process); it was not run again, and what it did before it "+
			"was stopped may remain", tool)
	}
	return fmt.Sprintf("Tool call %s was interrupted: the session stopped while it was running; it was not run again", tool)
}

func (l *loopLogic) emitSession(c actors.WrapperContext, s *loopSession, ev SessionEvent) {
	c.ToOuter(messages.Meta(s.stream, MetaSession, mustJSON(ev)))
}
