package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// The names of the META frames that carry a session's requests and
// answers over the wire: only *messages.Frame crosses it (see package
// remote), so the cluster's own protocol is two META frames with JSON
// payloads.
const (
	metaRun    = "polyweave.session.run"
	metaStatus = "polyweave.session.status"
)

// The states of a session incarnation, as its status frame reports them.
const (
	stateRunning = "running" // working; ask again
	stateDone    = "done"    // answered: Text holds the answer
	stateFailed  = "failed"  // failed: Error says why
	stateMoved   = "moved"   // this incarnation stopped (moved, fenced): ask again
	stateRetry   = "retry"   // this incarnation could not run (its store failed): ask again
	stateRefused = "refused" // this incarnation cannot run, nor can a new one: Cause says why
)

// The causes of a refused status: what makes asking again useless.
const (
	causeStoreClosed  = "store_closed"  // the member's store is closed: durability.ErrClosed
	causeInvalidID    = "invalid_id"    // the store cannot hold the session's id: durability.ErrInvalidName
	causeStoreRefused = "store_refused" // the store refuses the session for good: ErrStoreRefused
	causeTooLarge     = "too_large"     // the session's answer is over its member's frame limit: remote.ErrTooLarge
)

// refusal returns the error a refused status's cause stands for.
func refusal(cause string) error {
	switch cause {
	case causeStoreClosed:
		return durability.ErrClosed
	case causeInvalidID:
		return durability.ErrInvalidName
	case causeStoreRefused:
		return ErrStoreRefused
	case causeTooLarge:
		return remote.ErrTooLarge
	}
	return ErrSessionFailed
}

// MaxSessionIDLen bounds a session id's length in bytes: a member runs
// the session as a tool loop's, kept in the store under its id, and the
// record of its calls held for approval under the id and
// tools.ApprovalStoreSuffix; it is [tools.MaxSessionIDLen], which keeps
// both within durability.MaxNameLen (pgstore.MaxNameLen too).
const MaxSessionIDLen = tools.MaxSessionIDLen

// checkSessionID reports why id cannot name a session, wrapping
// durability.ErrInvalidName, or nil: the store keeps a session under its
// id (see [MaxSessionIDLen]), and requests carry the id in protobuf
// strings, which must be valid UTF-8.
func checkSessionID(id string) error {
	var why string
	switch {
	case id == "":
		why = "it is empty"
	case !utf8.ValidString(id):
		why = "it is not valid UTF-8"
	case len(id) > MaxSessionIDLen:
		why = fmt.Sprintf("it is %d bytes long, more than %d (the store's names hold the id and a suffix)", len(id), MaxSessionIDLen)
	default:
		return nil
	}
	return fmt.Errorf("session id %s: %w: %s", shortID(id), durability.ErrInvalidName, why)
}

// shortID quotes id for an error message, cut short when it is long
// (tools.ClipID).
func shortID(id string) string { return fmt.Sprintf("%q", tools.ClipID(id)) }

// param is one PARAM of the request that starts a session.
type param struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// runRequest is the payload of a metaRun frame.
type runRequest struct {
	Params []param `json:"params"`
}

// status is the payload of a metaStatus frame.
type status struct {
	State  string `json:"state"`
	Text   string `json:"text,omitempty"`
	Error  string `json:"error,omitempty"`
	Cause  string `json:"cause,omitempty"` // of a refused status
	Member string `json:"member,omitempty"`
	Epoch  uint64 `json:"epoch,omitempty"`
	// Claimed is set once the incarnation has claimed the session: its
	// store took the claim's write, proof that the store works.
	Claimed bool `json:"claimed,omitempty"`
}

func runFrame(id string, req runRequest) (*messages.Frame, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return &messages.Frame{Type: messages.FrameType_META, StreamId: id, Name: metaRun, Payload: b}, nil
}

func statusFrame(id string, st status) *messages.Frame {
	b, _ := json.Marshal(st) // strings and a number: cannot fail
	return &messages.Frame{Type: messages.FrameType_META, StreamId: id, Name: metaStatus, Payload: b}
}

// Local messages of a session actor to itself (never sent over the
// wire), from its run and its timers. Each carries the generation of the
// actor instance that sent it: one that reaches a later instance (after
// its supervisor restarted the actor) is ignored.
type (
	holdExpired struct{ gen, key uint64 } // a waiter's hold time has passed
	finished    struct {                  // the incarnation's run ended
		gen uint64
		st  *status
	}
	lingered struct{ gen, seq uint64 } // an ended session's linger time has passed since request seq
	claimed  struct{ gen uint64 }      // the incarnation has claimed the session
)

func (m holdExpired) generation() uint64 { return m.gen }
func (m finished) generation() uint64    { return m.gen }
func (m lingered) generation() uint64    { return m.gen }
func (m claimed) generation() uint64     { return m.gen }

// sessionActor is the virtual actor (grain) of one session on the member
// that hosts it. It starts the session's loop on the first run request
// (claiming the session in the store first), answers run requests with
// the session's status, and stops the loop when the cluster moves the
// session away or the member stops. When its supervisor restarts it (it
// panicked), the instance that ends cancels its run and answers the
// requests it holds (moved), as when it stops: the new instance knows
// nothing of them, and runs the session again on the next request.
type sessionActor struct {
	m       *Member
	gen     uint64 // this instance's generation: unique on its member
	id      string
	st      status
	waiters map[uint64]waiter
	seq     uint64
	cancel  context.CancelFunc
	lingers sessionTimer // the linger timer of the ended session, nil if none
}

// waiter is a run request a session actor holds: who to answer, and the
// timer of its hold.
type waiter struct {
	to   *actor.PID
	hold sessionTimer
}

// sessionTimer is a timer a session actor started: stopped when what it
// times is answered, and when the instance ends (it restarts or stops),
// rather than left to fire into a later instance, or a stopped system.
type sessionTimer interface{ Stop() bool }

// afterFunc starts a session actor's timers: time.AfterFunc, but for
// tests that watch them.
var afterFunc = func(d time.Duration, f func()) sessionTimer { return time.AfterFunc(d, f) }

// answerWaiters answers every request s holds with its status, and stops
// their hold timers.
func (s *sessionActor) answerWaiters(ctx actor.Context) {
	for k, w := range s.waiters {
		w.hold.Stop()
		ctx.Send(w.to, statusFrame(s.id, s.st))
		delete(s.waiters, k)
	}
}

// newSessionActor returns a new instance of a session actor of m, of a
// generation of its own.
func (m *Member) newSessionActor() actor.Actor {
	return &sessionActor{m: m, gen: m.sessionGens.Add(1)}
}

// testHookSessionMessage, unless nil, is called with every message a
// session actor receives, before the actor handles it.
var testHookSessionMessage func(msg any)

func (s *sessionActor) Receive(ctx actor.Context) {
	if testHookSessionMessage != nil {
		testHookSessionMessage(ctx.Message())
	}
	if g, ok := ctx.Message().(interface{ generation() uint64 }); ok && g.generation() != s.gen {
		return // from an instance before a restart: its run was cancelled, its waiters answered
	}
	switch msg := ctx.Message().(type) {
	case *pacluster.ClusterInit:
		s.id = msg.Identity.GetIdentity()
	case *messages.Frame:
		s.request(ctx, msg)
	case holdExpired:
		if w, ok := s.waiters[msg.key]; ok {
			delete(s.waiters, msg.key)
			ctx.Send(w.to, statusFrame(s.id, s.st))
		}
	case claimed:
		if s.st.State == stateRunning {
			s.st.Claimed = true
		}
	case finished:
		s.st = s.m.fit(s.id, *msg.st)
		s.cancel()
		s.answerWaiters(ctx)
		switch {
		case s.st.State == stateMoved || s.st.State == stateRetry || s.st.State == stateRefused && s.st.Cause != causeTooLarge || s.m.linger < 0:
			// Fenced (a newer incarnation owns the session), stopped
			// because of the store (a failure that may pass, or a
			// closed store, which is no answer to keep), or not to be
			// kept: the next request activates it again, wherever the
			// cluster says. (An answer too large is kept: the session
			// ended, and a new incarnation would answer the same.)
			ctx.Stop(ctx.Self())
		default:
			s.linger(ctx)
		}
	case lingered:
		s.lingers = nil // fired
		if msg.seq == s.seq {
			ctx.Stop(ctx.Self()) // no request since: the store answers the next one
		} else {
			s.linger(ctx)
		}
	case *actor.Restarting, *actor.Stopping:
		// The run started here ends, and the requests held here are
		// answered, their timers stopped (and the linger's): a
		// restarted actor is a new instance that knows none of them (a
		// stopped one is gone).
		if s.cancel != nil {
			s.cancel()
		}
		if s.st.State == stateRunning {
			s.st = status{State: stateMoved, Member: s.m.Address()}
		}
		s.answerWaiters(ctx)
		if s.lingers != nil {
			s.lingers.Stop()
			s.lingers = nil
		}
	}
}

func (s *sessionActor) request(ctx actor.Context, f *messages.Frame) {
	if f.GetType() != messages.FrameType_META || f.GetName() != metaRun || ctx.Sender() == nil {
		return
	}
	if f.GetStreamId() != s.id {
		// A request for another session (sent to a stale activation):
		// never run it here. The answer, in this session's name, tells
		// the requester so.
		ctx.Respond(statusFrame(s.id, status{State: stateMoved, Member: s.m.Address(),
			Error: fmt.Sprintf("a run request for session %q reached session %q", f.GetStreamId(), s.id)}))
		return
	}
	switch s.st.State {
	case "":
		var req runRequest
		if err := json.Unmarshal(f.GetPayload(), &req); err != nil {
			ctx.Respond(statusFrame(s.id, status{State: stateFailed, Error: fmt.Sprintf("bad run request: %v", err)}))
			return
		}
		s.st = status{State: stateRunning, Member: s.m.Address()}
		s.waiters = map[uint64]waiter{}
		runCtx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		self, root, id, gen := ctx.Self(), ctx.ActorSystem().Root, s.id, s.gen
		if !s.m.runs.Go(func() {
			st := s.m.run(runCtx, id, req.Params, func() { root.Send(self, claimed{gen}) })
			root.Send(self, finished{gen, st})
		}) {
			s.st = status{State: stateMoved}
		}
	case stateRunning:
	default:
		s.seq++
		ctx.Respond(statusFrame(s.id, s.st))
		return
	}
	if s.st.State != stateRunning {
		ctx.Respond(statusFrame(s.id, s.st))
		return
	}
	s.seq++
	key := s.seq
	self, root := ctx.Self(), ctx.ActorSystem().Root
	gen := s.gen
	s.waiters[key] = waiter{to: ctx.Sender(), hold: afterFunc(s.m.hold, func() { root.Send(self, holdExpired{gen, key}) })}
}

// fit returns the status st of session id, made to fit the member's
// frame limit, since a frame over it would not be sent whole to the
// requester. A session's answer (done) over the limit is replaced by a
// refused status of cause causeTooLarge that says so; any other status
// keeps its state, and its error is clipped (the frame limit is never
// so low that an error of a few hundred bytes does not fit: see
// remote.MinFrameBytes).
func (m *Member) fit(id string, st status) status {
	n := proto.Size(statusFrame(id, st))
	if n <= m.maxFrame {
		return st
	}
	if st.State != stateDone {
		if clipped, ok := clipError(id, st, m.maxFrame); ok {
			return clipped
		}
	}
	return status{State: stateRefused, Cause: causeTooLarge, Member: st.Member, Epoch: st.Epoch,
		Error: fmt.Sprintf("the session's answer (%s) is %d bytes, over the frame limit of %d of its member (Options.MaxFrameBytes)", st.State, n, m.maxFrame)}
}

// clipError returns st with the end of its error cut off (and a note of
// its full length in its place) so that its frame is at most maxFrame
// bytes, keeping as much as fits, or false when not even the note fits.
func clipError(id string, st status, maxFrame int) (status, bool) {
	full := st.Error
	note := fmt.Sprintf("... (clipped to fit the frame limit of %d (Options.MaxFrameBytes); %d bytes in all)", maxFrame, len(full))
	clipped := func(keep int) status {
		for keep > 0 && !utf8.RuneStart(full[keep]) {
			keep--
		}
		c := st
		c.Error = full[:keep] + note
		return c
	}
	fits := func(keep int) bool { return proto.Size(statusFrame(id, clipped(keep))) <= maxFrame }
	if !fits(0) {
		return st, false
	}
	// The largest length that fits: JSON may escape a byte into several,
	// but never into none, so it is at most maxFrame.
	lo, hi := 0, min(len(full), maxFrame)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return clipped(lo), true
}

// linger stops the ended session once Linger passes without a request.
func (s *sessionActor) linger(ctx actor.Context) {
	seq, gen, self, root := s.seq, s.gen, ctx.Self(), ctx.ActorSystem().Root
	if s.lingers != nil {
		s.lingers.Stop()
	}
	s.lingers = afterFunc(s.m.linger, func() { root.Send(self, lingered{gen, seq}) })
}

// run is one incarnation of session id on this member: it claims the
// session (fencing every older incarnation), builds its loop on the
// claim, sends it the first request and reads the stream to its end. A
// loop resuming a stored session continues it (see tools.SessionOptions).
// onClaim is called once the claim has succeeded.
func (m *Member) run(ctx context.Context, id string, params []param, onClaim func()) *status {
	st, claim := runSession(ctx, m.rt, m.store, m.timeout, m.newSession, id, params, onClaim)
	st.Member = m.Address()
	if claim != nil {
		st.Epoch = claim.Epoch()
	}
	switch st.State {
	case stateDone:
		m.log.Debug("session done", "session", id, "epoch", st.Epoch)
	case stateMoved:
		m.log.Info("session incarnation ended: moved or fenced", "session", id, "epoch", st.Epoch, "reason", st.Error)
	case stateRetry:
		m.log.Warn("session incarnation could not run: its store failed; the next request tries again", "session", id, "epoch", st.Epoch, "error", st.Error)
	case stateRefused:
		m.log.Error("session cannot run on this member", "session", id, "epoch", st.Epoch, "error", st.Error)
	default:
		m.log.Warn("session failed", "session", id, "epoch", st.Epoch, "error", st.Error)
	}
	return st
}

// sessionStore is what an incarnation needs of the shared store (a
// *pgstore.Store).
type sessionStore interface {
	Claim(ctx context.Context, key string) (*pgstore.Claim, error)
	Epoch(ctx context.Context, key string) (uint64, error)
}

// sessionStream is the stream id a session's loop runs its conversation
// on.
const sessionStream = "session"

// runSession runs one incarnation of session id in rt, on a claim of it
// in store, to the end of its stream or until ctx ends (then the state is
// moved). A run whose loop failed because a newer claim was taken is
// moved, with the fencing error. A failure of the store is retry, not
// failed: it may pass, and the session has not failed (the next
// incarnation resumes it from the store). That is a claim that fails, a
// loop that failed after its store did (a write refused, its connections
// lost), and a loop failure for which the check for a newer claim fails
// (it gives up after timeout). A store that can never serve the session
// (closed, unable to hold its id, or refusing it for good: see
// storeRefuses) is refused. A loop that its supervisor restarted while
// the store worked is sent the first request again, and resumes the
// session from the store (up to maxLoopResumes times). onClaim, unless
// nil, is called once the claim has succeeded.
func runSession(ctx context.Context, rt *actors.Runtime, store sessionStore, timeout time.Duration, newSession SessionFunc, id string, params []param, onClaim func()) (*status, *pgstore.Claim) {
	failed := func(err error) *status { return &status{State: stateFailed, Error: err.Error()} }
	if err := checkSessionID(id); err != nil {
		return &status{State: stateRefused, Cause: causeInvalidID, Error: err.Error()}, nil
	}
	claim, err := store.Claim(ctx, id)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return &status{State: stateMoved, Error: ctx.Err().Error()}, nil
	case errors.Is(err, durability.ErrClosed):
		return &status{State: stateRefused, Cause: causeStoreClosed, Error: fmt.Sprintf("claim session %s: %v", shortID(id), err)}, nil
	case errors.Is(err, durability.ErrInvalidName):
		return &status{State: stateRefused, Cause: causeInvalidID, Error: fmt.Sprintf("claim session %s: %v", shortID(id), err)}, nil
	case storeRefuses(err):
		return &status{State: stateRefused, Cause: causeStoreRefused, Error: fmt.Sprintf("claim session %s: %v", shortID(id), err)}, nil
	default:
		return &status{State: stateRetry, Error: fmt.Sprintf("claim session %s: %v", shortID(id), err)}, nil
	}
	defer claim.Close()
	if onClaim != nil {
		onClaim()
	}
	model, lo, err := newSession(id)
	if err != nil {
		return failed(fmt.Errorf("session %s: %w", shortID(id), err)), claim
	}
	var opts tools.LoopOptions
	if lo != nil {
		opts = *lo
	}
	var so tools.SessionOptions
	if opts.Session != nil {
		so = *opts.Session
	}
	watched, loopStore := watchStore(claim)
	so.ID, so.Store = id, loopStore
	opts.Session = &so
	spec, err := tools.NewLoop(model, &opts)
	if err != nil {
		return failed(fmt.Errorf("session %s: %w", shortID(id), err)), claim
	}
	conn, err := rt.Start(spec)
	if err != nil {
		return failed(fmt.Errorf("session %s: start loop: %w", shortID(id), err)), claim
	}
	defer conn.Close(context.Background())
	frames := make([]*messages.Frame, 0, len(params)+1)
	for _, p := range params {
		frames = append(frames, messages.RawParam(sessionStream, p.Name, p.Value))
	}
	frames = append(frames, messages.End(sessionStream))
	loopID := conn.Ref().String()
	restarts := 0      // the loop's restarts seen so far
	var loopErr string // why the loop failed
	for resumes := 0; ; resumes++ {
		text, failure, err := askLoop(ctx, conn, frames)
		if err != nil {
			if ctx.Err() != nil {
				return &status{State: stateMoved, Error: "stopped"}, claim
			}
			loopErr = err.Error()
			break
		}
		if failure == "" {
			return &status{State: stateDone, Text: text}, claim
		}
		loopErr = failure
		if watched.failure() != nil || resumes == maxLoopResumes {
			break // a store that failed: see below
		}
		// A loop that its supervisor restarted (it failed: a panic, a
		// bug) closed the stream with ERROR and END, reloaded the
		// session from the store, and waits for the first request
		// again: send it, and the session resumes where it was stored.
		// A loop that did not restart (its model answered ERROR) or
		// that its supervisor stopped has failed the session.
		n, again, err := awaitLoopRestart(ctx, rt, loopID, restarts)
		if err != nil {
			return &status{State: stateMoved, Error: "stopped"}, claim
		}
		if !again {
			break
		}
		restarts = n
	}
	// The loop failed; when a newer claim has been taken, it was fenced.
	// Also when ctx has ended (the incarnation is stopping), but not
	// for longer than a request may take: a store that does not answer
	// must not keep the incarnation, and Close, waiting.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	epoch, eerr := store.Epoch(ectx, id)
	cancel()
	switch serr := watched.failure(); {
	case errors.Is(serr, durability.ErrClosed) || errors.Is(eerr, durability.ErrClosed):
		return &status{State: stateRefused, Cause: causeStoreClosed, Error: fmt.Sprintf("session %s: %s", shortID(id), loopErr)}, claim
	case storeRefuses(eerr):
		return &status{State: stateRefused, Cause: causeStoreRefused, Error: fmt.Sprintf("session %s: %s (and its epoch could not be read: %v)", shortID(id), loopErr, eerr)}, claim
	case eerr != nil:
		// Whether it was fenced is unknown: the next incarnation,
		// which resumes from the store, tells.
		return &status{State: stateRetry, Error: fmt.Sprintf("session %s: %s (and its epoch could not be read: %v)", shortID(id), loopErr, eerr)}, claim
	case epoch != claim.Epoch():
		return &status{State: stateMoved, Error: fmt.Sprintf("%s (epoch %d, now %d): %s", pgstore.ErrFenced, claim.Epoch(), epoch, loopErr)}, claim
	case storeRefuses(serr):
		// Asking again cannot help: the next incarnation would be
		// refused the same.
		return &status{State: stateRefused, Cause: causeStoreRefused, Error: fmt.Sprintf("session %s: %s", shortID(id), withCause(loopErr, serr))}, claim
	case serr != nil:
		// The store failed the loop: the session is as it was stored,
		// and the next incarnation resumes it from there.
		return &status{State: stateRetry, Error: fmt.Sprintf("session %s: its store failed: %s", shortID(id), loopErr)}, claim
	}
	return failed(fmt.Errorf("session %s: %s", shortID(id), loopErr)), claim
}

// maxLoopResumes bounds how many times an incarnation sends its first
// request again to a loop that its supervisor restarted (see
// awaitLoopRestart): the supervisor bounds the restarts per window of
// time, not in all, and a loop that fails at every step would otherwise
// be resumed for ever.
const maxLoopResumes = 10

// askLoop sends frames, the session's first request, to the loop on conn
// and reads the stream to its END. It returns the session's answer (the
// text after the last tool call), or the loop's failure (the text of its
// ERROR), or the error that ended the read (ctx's, or the loop stopped).
func askLoop(ctx context.Context, conn *actors.Conn, frames []*messages.Frame) (text, failure string, err error) {
	if err := conn.SendAll(frames...); err != nil {
		return "", "", err
	}
	got, err := conn.RecvStream(ctx, sessionStream)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, f := range got {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			if !f.GetMeta().GetToolArgStream() {
				b.WriteString(f.GetText())
			}
		case messages.FrameType_TOOL_CALL:
			b.Reset() // the answer is the text after the last call
		case messages.FrameType_ERROR:
			failure = f.GetText()
		}
	}
	return b.String(), failure, nil
}

// awaitLoopRestart tells whether the loop id of rt has been restarted by
// its supervisor more than seen times (the restart is counted before the
// stream open at the failure gets its ERROR and END), and if so waits
// until it runs again and returns its restarts. It returns false when
// the loop has not restarted, or has stopped for good (its supervisor's
// restart intensity was passed), and ctx's error when ctx ends first.
func awaitLoopRestart(ctx context.Context, rt *actors.Runtime, id string, seen int) (int, bool, error) {
	changed := make(chan struct{}, 1)
	stop := rt.WatchActors(func(ev actors.ActorEvent) {
		if ev.Actor.ID == id {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	for {
		info, ok := actorInfo(rt, id)
		switch {
		case !ok || info.State == actors.ActorStopped || info.Restarts <= seen:
			return 0, false, nil
		case info.State == actors.ActorRunning:
			return info.Restarts, true, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
}

// actorInfo returns what rt knows of its duplex actor id, false when it
// is not alive.
func actorInfo(rt *actors.Runtime, id string) (actors.ActorInfo, bool) {
	for _, info := range rt.Actors() {
		if info.ID == id {
			return info, true
		}
	}
	return actors.ActorInfo{}, false
}

// storeRefuses reports whether err, a failure of the store, is one that
// asking again cannot cure: the store says so (durability.IsPermanent:
// closed, damaged, …), or PostgreSQL refuses the statement for good
// because the role lacks the privilege (SQLSTATE 42501
// insufficient_privilege). A read-only database (25006
// read_only_sql_transaction) is not for good: it is what clients see
// during a failover (a standby being promoted, a demoted primary behind
// a name not yet moved), so it is asked again within the bound.
func storeRefuses(err error) bool {
	if durability.IsPermanent(err) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlInsufficientPrivilege
}

// sqlInsufficientPrivilege is the SQLSTATE of PostgreSQL's refusal that
// asking again cannot cure.
const sqlInsufficientPrivilege = "42501"

// withCause returns the loop's error, followed by the store's when the
// loop's does not quote it.
func withCause(loopErr string, storeErr error) string {
	if strings.Contains(loopErr, storeErr.Error()) {
		return loopErr
	}
	return fmt.Sprintf("%s (the store: %v)", loopErr, storeErr)
}

// watchedStore is the store an incarnation's loop uses (its claim): it
// keeps the last failure of the store, so that a loop that failed because
// its store did is told apart from a session that failed. It keeps it
// also when later calls succeed: the loop's actor restarts after a
// failed write, and reads the stored session again, before its stream
// ends with the write's error. Errors that calling again cannot cure
// (damaged data, an invalid name or index) are not failures of the store
// but of the session, and a GetEvents whose callback failed is a store
// that worked.
type watchedStore struct {
	durability.Store
	mu   sync.Mutex
	last error
}

// watchStore returns s watched (see watchedStore), and the store to give
// the loop: the watched store, which implements the optional interfaces
// of package durability that s implements, and only those
// ([durability.Salvager]), so that a type assertion finds on it what it
// finds on s.
func watchStore(s durability.Store) (*watchedStore, durability.Store) {
	w := &watchedStore{Store: s}
	if sv, ok := s.(durability.Salvager); ok {
		return w, &watchedSalvager{watchedStore: w, sv: sv}
	}
	return w, w
}

// failure returns the store's last failure, or nil.
func (w *watchedStore) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// note records err when it is a failure of the store, and returns it.
func (w *watchedStore) note(err error) error {
	var se *durability.StoreError
	if errors.As(err, &se) && !errors.Is(err, durability.ErrDamaged) &&
		!errors.Is(err, durability.ErrInvalidName) && !errors.Is(err, durability.ErrIndexOverflow) {
		w.mu.Lock()
		w.last = err
		w.mu.Unlock()
	}
	return err
}

// PersistEvent implements durability.Store.
func (w *watchedStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	return w.note(w.Store.PersistEvent(ctx, name, index, data))
}

// PersistEvents implements durability.Store.
func (w *watchedStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	return w.note(w.Store.PersistEvents(ctx, name, first, data))
}

// GetEvents implements durability.Store.
func (w *watchedStore) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	fnFailed := false
	err := w.Store.GetEvents(ctx, name, from, to, func(index uint64, data []byte) error {
		err := fn(index, data)
		fnFailed = err != nil
		return err
	})
	if fnFailed {
		return err // the callback's error: the store worked
	}
	return w.note(err)
}

// DeleteEvents implements durability.Store.
func (w *watchedStore) DeleteEvents(ctx context.Context, name string, through uint64) error {
	return w.note(w.Store.DeleteEvents(ctx, name, through))
}

// PersistSnapshot implements durability.Store.
func (w *watchedStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	return w.note(w.Store.PersistSnapshot(ctx, name, index, data))
}

// GetSnapshot implements durability.Store.
func (w *watchedStore) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	snap, ok, err := w.Store.GetSnapshot(ctx, name)
	return snap, ok, w.note(err)
}

// DeleteSnapshots implements durability.Store.
func (w *watchedStore) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	return w.note(w.Store.DeleteSnapshots(ctx, name, through))
}

// watchedSalvager is the watched store of a store that salvages.
type watchedSalvager struct {
	*watchedStore
	sv durability.Salvager
}

// Salvage implements durability.Salvager.
func (w *watchedSalvager) Salvage(ctx context.Context, name string) (durability.Salvaged, error) {
	out, err := w.sv.Salvage(ctx, name)
	return out, w.note(err)
}
