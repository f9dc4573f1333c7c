package tools

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/internal/prune"
	"github.com/polyweave/polyweave-go/messages"
)

// DefaultWrapperType is the wrapper type a durable router reports when
// [DurabilityOptions].WrapperType is empty.
const DefaultWrapperType = "streaming-router"

// DefaultSnapshotEvery is the router's snapshot interval when
// [DurabilityOptions].SnapshotEvery is zero. A router's events are small
// (mostly argument chunks) while a snapshot holds every pending call's
// arguments, so it snapshots less often than durability's default: a
// recovery replays at most this many small events.
const DefaultSnapshotEvery = 1000

// DefaultRecoveredTimeout is how long a recovered call waits for its
// stream to be written on again when [DurabilityOptions].RecoveredTimeout
// is zero: a consumer that carries on after a restart does so within
// seconds, and one gone for minutes has moved on.
const DefaultRecoveredTimeout = 5 * time.Minute

// MetaState is the name of the META frames in which a durable router
// announces changes of its state (see [DurabilityOptions]).
const MetaState = "state"

// DurabilityOptions make a router durable: the seed's options.durability
// with an ObservableState. A nil *DurabilityOptions (the default) means a
// router whose pending calls live in memory only. Options are copied.
//
// # What is persisted
//
// Every change of the router's [PendingCalls] (a streaming call starting,
// an argument chunk, a call completing, a stream ending with calls still
// pending, a restore, a stream of pending calls closed towards the
// consumer or written on again: see below) is persisted as a protobuf
// event (messages.RouterCallStarted, RouterChunkAppended,
// RouterCallCompleted, RouterStreamEnded, RouterRestored,
// RouterStreamClosed, RouterStreamOpened) BEFORE it is applied, and a
// snapshot (messages.RouterState) is taken every SnapshotEvery events.
// Frames that change nothing (a chunk for a call that is not pending, the
// END of a stream without pending calls, atomic TOOL_CALLs) are not
// persisted, nor are closed streams without a RecoveredTimeout limit.
//
// Argument chunks are written together: a chunk shows nowhere until its
// call completes or its stream ends, so the router holds the chunks of a
// run of frames and writes them in one store call (consecutive chunks of
// a call as one event) with the next event that shows, before anything
// else leaves the router (a frame passed on, a tool's result), when its
// incarnation ends (a failure, a stop), after 1024 chunks or 32 KiB, or
// at the latest a millisecond after the first chunk held. Held chunks are
// applied once durable: the state is what the store holds.
//
// When the router restarts (its supervisor restarted it after a panic, or
// the process started again with the same store), it recovers its pending
// calls: later chunks of a call complete it with byte-identical arguments,
// and it runs once. As for every duplex, the streams open at a restart are
// closed towards the consumer with ERROR and END (the model adapter inside
// the router restarted too), and a stream of recovered calls stays closed
// until the consumer writes on it again: until a frame that opens a call
// on it (anything but META, END, ERROR, TOOL_RESULT, CANCEL, ABORT and
// TICK, as the runtime counts it; see [actors.OpensStream]) goes into the
// router, nothing goes out on it, neither the router's state frames nor
// what the model emits there. With that frame, before it goes on to the
// model, the router announces the calls recovered on the stream that are
// still pending (the "recovered" state frame below); they then complete
// if their chunks keep coming, and are answered with error results if
// the stream ends first, as any call. A CANCEL of a closed stream ends
// the recovered call it names, or all of them when it names none, and an
// ABORT all of them (their removal persisted, their cancelled results
// written into the model), as does the model's END or ERROR on it
// (invalid arguments); the stream stays closed.
//
// A recovered call whose stream is not written on again within
// RecoveredTimeout of the recovery is ended: its removal is persisted, so
// that no later restart recovers it, and then its error result (kind
// [FailureStopped]) is written into the model, as the router answers
// every call; nothing goes out to the consumer on the closed stream. A
// consumer that writes on the stream after that finds no call there:
// more chunks of the call are dropped, as those of any call that is not
// pending. The limit runs from the recovery that closed the call's
// stream first: the time is persisted with the call (closed_at, before
// anything goes out), so a router restarted again, however often, ends
// the call when it has waited RecoveredTimeout in all. Only a consumer
// that writes on the stream again starts it again, at the next restart:
// that its calls wait no more is persisted before they are announced to
// it (one write per stream it comes back to). A call recovered from a
// state stored before calls had that time waits from the recovery that
// loads it. The time is the wall clock's: a clock set forward makes
// calls wait shorter, one set back longer, but no more than
// RecoveredTimeout after the router finds the time ahead of the clock
// (at a recovery, a restore, or when the limit timer goes off), from
// which they then wait.
//
// A call the model starts on a closed stream (on a CANCEL, say, or on
// anything else of the consumer's that does not open a call and so goes
// on to the model) waits on it as the recovered ones do, from its start:
// its state frames do not go out, it is announced with them when the
// consumer writes on the stream again, and it is ended RecoveredTimeout
// after its start if the consumer does not, rather than pending until the
// model ends a stream it may never end (its start and the time it waits
// from are one write).
//
// The results the router writes into the model for the calls of a closed
// stream (ended at the limit, cancelled, cut short by the model's END,
// or run there) do not go out to the consumer when the model echoes them
// (model adapters do not: they ignore results), not even when the
// consumer has written on the stream again before the result or its
// echo came: it was told of no such call there. A call is one of a
// closed stream when its stream is closed as the router runs it, or
// answers it without running it: the result of a call run while its
// stream was open, which the consumer was told of, goes out when the
// model echoes it on the stream open again, though a restore frame
// closed the stream while the call ran, and though the model started a
// call of the same id there while it ran. The router expects such an
// echo until it comes or the model ends the stream (not one call of the
// consumer's alone: see below): a result of the call's stream, id and
// payload, as the router wrote it (models that number the calls of each
// response afresh reuse ids, so a result of the same id and another
// payload is another call's, and goes out). Once it came, the model's
// echo of it again stays in too, until the model ends the stream or
// starts a call of that id there. It keeps at most 256 such results at a
// time: past that, it forgets first the oldest whose echo came, or, when
// none has, the oldest, whose echo, should it come after all, goes out.
// (A result of another call of the same id with the very payload of the
// one expected, both cancelled alike, say, cannot be told from the echo:
// the first to come is taken for it.)
// A stream stays closed after its calls have ended, until the consumer
// writes on it again, but of such streams the router keeps the 256 whose
// last call ended last (restore frames may name ever new streams): the
// model's frames on an older one go out again.
//
// The model's END or ERROR with the tool-call id of one of several calls
// the consumer has open on a stream (see below) ends that call alone, as
// it does for the runtime: of the model's calls pending on the stream,
// it ends only the one of that id, if there is one, answered as invalid
// arguments (its removal persisted, event "call_ended"), and the others
// stay pending, their arguments still to come. Any other END or ERROR
// ends the stream and every call pending there (event "stream_ended").
// The consumer's call stays open until the model's END of it, as for the
// runtime: the END that follows an ERROR of its id ends it alone too.
//
// A restore frame (see below) puts calls on streams as a recovery does:
// those on the restore frame's stream and on the streams the consumer has
// a call open on (it wrote a call-opening frame on them since the
// router last started, and the model has not ended them: as for the
// runtime, the model's END of one of the consumer's calls there, with
// that call's tool-call id, ends that call alone, the stream staying
// open while the consumer has others there, and an END of no id ends
// the stream) are announced at once; the streams of the others are closed as a restart
// closes them, and their calls announced (event "restored") when the
// consumer writes a call-opening frame on them, or ended RecoveredTimeout
// after the restore, as recovered calls are. That holds for the calls a
// restore puts on a stream a restart closed as well: their limit runs
// from the restore (the router ignores the closed times of a restore
// frame's state and clears those it holds: the restore is persisted with
// the time of the restore for the streams it closes, one write).
// The router remembers every stream the consumer has a call open on
// until the model ends it, as the runtime does; of those whose calls the
// model ended by their ids alone (frames of no id still open there: a
// model that never ends its streams), it remembers, as the runtime keeps
// them, the first two it opened and only the 1024 to 1280 others opened
// last, however lately written on and whatever calls are pending there,
// so they do not grow its memory without end (see [NewRouter]). A
// stream only the model wrote on holds no call of the consumer's. A
// restore's calls
// on a stream it forgot wait there as on a stream the consumer has no
// call open on: they are announced when the consumer writes on it
// again, or ended at the limit; none is lost. As its runtime, which
// recovers its calls, does, a durable router counts what the consumer
// writes of a call the model ended (a late argument chunk) as that call,
// open again.
//
// The router's actor id (its name and its ancestors' names) is the
// persistence key: it must be the same from one run to the next.
//
// # Stores of other releases
//
// Events and snapshots are stored as protobuf Any values, decoded by
// their type at recovery. A router reads what earlier releases stored: a
// state without closed times (messages.RouterState.closed, and the state
// of a RouterRestored) has its calls wait from the recovery that loads
// it. The other way round does not hold in full. RouterStreamClosed and
// RouterStreamOpened, which a router with a RecoveredTimeout limit writes
// when a restart, a restore frame or its model puts calls on a closed
// stream, when it restamps a time ahead of the clock, and when the
// consumer comes back to such a stream, are types a release before them
// does not know: replaying one, its recovery fails to decode it (a
// *durability.StoreError, Op durability.OpDecode), as for any store
// failure (see below), and its supervisor's restart limit stops it. Of
// what it can read (a snapshot, a RouterRestored) it drops the closed
// times, a field it does not know: their calls wait from its recovery,
// or, in a release without the limit, until a CANCEL, an ABORT, the
// model's END or a restore removes them. So a router goes back to such
// a release only on a store whose events since the last snapshot hold
// neither type, or on a new store (its pending calls are then lost).
//
// # Failures
//
// A store failure is an actor failure: the event is not applied, the
// router's supervisor gets a failure that wraps the *durability.StoreError
// (errors.As), and the open streams are closed with ERROR and END. A
// restart then recovers what was persisted; with the store gone for good,
// the supervisor's restart limit stops the router.
//
// # Observable state
//
// After each change other than a chunk, the router emits on the stream
// concerned a META frame named [MetaState] whose meta.durability carries
// WrapperID and WrapperType and whose payload is a compact JSON object:
//
//	{"event":"started","tool_call_id":"call_1","stream_pending":1,"pending":3}
//
// with event one of started, completed, cancelled (a CANCEL or ABORT cut
// the call's arguments short: its removal is persisted before its
// cancelled result leaves, so a recovered router does not answer it
// again), stream_ended, call_ended (the model's END or ERROR of that call
// alone, the stream going on with the consumer's other calls there, cut
// its arguments short: see below), and, listing the stream's pending call ids in
// "tool_call_ids", recovered (after a restart, when the consumer writes
// on the stream again: see above) and restored (after a restore frame,
// at once or when the consumer writes on the stream: see above). None is
// emitted on a stream that a restart or a restore closed and the
// consumer has not written on since.
// A META
// frame written into the router whose meta.durability.restore_state is
// set, and whose wrapper_id is empty or WrapperID, replaces the pending
// calls with that snapshot (a serialized messages.RouterState, see
// [RestoreFrame]); it is persisted like any change and consumed, not
// forwarded. A restore frame that cannot be decoded is answered with a
// META frame named "restore_error", on its stream, unless that stream is
// closed (see above): then it is logged at Warn level, and nothing goes
// out.
type DurabilityOptions struct {
	// Store keeps the router's events and snapshots; required. The caller
	// owns it and closes it after the router has stopped.
	Store durability.Store
	// WrapperID names the router in its META state frames and is the
	// address of restore frames; default: the router's Name.
	WrapperID string
	// WrapperType is reported with WrapperID; default [DefaultWrapperType].
	WrapperType string
	// SnapshotEvery is N in "take a snapshot every N events"; zero means
	// [DefaultSnapshotEvery]. Negative values are rejected.
	SnapshotEvery int
	// Timeout bounds each store call; zero means none.
	Timeout time.Duration
	// RecoveredTimeout is how long after the restart that first recovered
	// it a recovered call, after a restore a call it put on a stream the
	// consumer had no call open on, or after its start a call the model
	// started on a closed stream, waits for the consumer to write on its
	// stream before it is ended (see above), however often the router
	// restarts meanwhile; zero means [DefaultRecoveredTimeout], a negative
	// value no limit: a call whose stream nobody writes on then stays
	// pending, in memory and in the store, until a CANCEL, an ABORT, the
	// model's END or ERROR on its stream or a restore frame removes it.
	RecoveredTimeout time.Duration
	// Logger receives store failures; nil discards.
	Logger *slog.Logger
}

// prepare validates the options and builds the provider.
func (o *DurabilityOptions) prepare(routerName string) (DurabilityOptions, *durability.Provider, error) {
	opts := *o
	if opts.Store == nil {
		return opts, nil, errors.New("durability: nil store")
	}
	if opts.WrapperID == "" {
		opts.WrapperID = routerName
	}
	if opts.WrapperType == "" {
		opts.WrapperType = DefaultWrapperType
	}
	if opts.SnapshotEvery == 0 {
		opts.SnapshotEvery = DefaultSnapshotEvery
	}
	if opts.RecoveredTimeout == 0 {
		opts.RecoveredTimeout = DefaultRecoveredTimeout
	}
	p, err := durability.NewProvider(opts.Store, &durability.ProviderOptions{
		SnapshotInterval: opts.SnapshotEvery, Timeout: opts.Timeout, Logger: opts.Logger})
	if err != nil {
		return opts, nil, fmt.Errorf("durability: %w", err)
	}
	return opts, p, nil
}

// RestoreFrame returns the META frame that restores a durable router
// (addressed by wrapperID; "" addresses any) to the pending calls in
// state (see [PendingCalls.State]), on stream streamID.
func RestoreFrame(streamID, wrapperID string, state *messages.RouterState) (*messages.Frame, error) {
	b, err := proto.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("restore frame: %w", err)
	}
	if b == nil {
		b = []byte{} // an empty state still restores
	}
	f := messages.Meta(streamID, "restore", nil)
	f.Meta = &messages.Metadata{Durability: &messages.Durability{WrapperId: wrapperID, RestoreState: b}}
	return f, nil
}

// durableRouter is the Wrapped of a durable router: its durableCore
// decides which event a frame makes, persists it (argument chunks held
// and written together), then applies it (the one Apply that recovery
// also replays through); then the router acts on the frame.
type durableRouter struct {
	*routerLogic
	meta  *messages.Metadata // the durability metadata of state frames
	id    string
	core  durableCore
	timer bool // a flushTimer is set
	// closed holds the streams of the calls this incarnation recovered,
	// which its restart closed, and those of calls a restore frame put on
	// streams the consumer had no call open on, that the consumer has not
	// written on since (see opened), with the state frame event that
	// announces their calls when it does ("recovered" or "restored"):
	// nothing goes out on them. Nil until a recovery or a restore puts
	// calls there. An entry stays after its calls have ended (the model
	// may echo their results, or start calls there), but of such quiet
	// streams only the last closedQuiet closed are kept (see pruneClosed):
	// restore frames naming ever new streams do not grow it without end.
	// closings counts the streams closed and those that lost their last
	// pending call while closed, which orders them.
	closed   map[string]closedStream
	closings uint64
	// armed is the time the limit timer is set for: the earliest end of
	// the calls waiting on closed streams; zero when none is set.
	armed time.Time
	// limit is how long the calls of a closed stream wait for it to be
	// written on again (RecoveredTimeout), from their closedAt; 0 for no
	// limit.
	limit time.Duration
	// echoOrder holds the results the router wrote into the model for
	// calls of closed streams (ended at the limit, cancelled, their
	// stream ended by the model, run there), in the order written, until
	// the model ends its stream, or, once their echo came, starts a call
	// of the same key (see echo): such an echo, and the model's echo of
	// it again, does not go out, even on a stream the consumer has
	// written on again meanwhile (it was told of no such call there).
	// Past echoLimit, the oldest of those whose echo came go, or else
	// the oldest (a model adapter ignores results and echoes none).
	// echoes counts them by call; echoSeed hashes their payloads.
	echoes    map[callKey]int
	echoOrder []echoWant
	echoSeed  maphash.Seed
	// ranClosed holds the calls running when their stream was closed or
	// opened (see freeze), with whether it was closed when they ran:
	// whether the router expects the echo of a call's result is decided
	// when the call runs, as the consumer was told of it then or not.
	// A call's entry goes when its result is delivered. Its key is the
	// TOOL_CALL frame the dispatcher runs (outstanding.call), which it
	// delivers the result with: a call of the same stream and id the
	// model starts while it runs, answered without running (the
	// dispatcher runs one call of a key at a time), is another frame, so
	// neither takes the other's entry. Nil until a stream with calls
	// running is closed or opened.
	ranClosed map[*messages.Frame]bool
}

// echoWant is a result of durableRouter.echoOrder.
type echoWant struct {
	call callKey
	sum  uint64 // the maphash of its payload
	// renewed: the model started a call of the same key since (see
	// echo): its echo is forgotten as it comes, so a result of the new
	// call with its very payload goes out.
	renewed bool
	// came: the echo came, before any call of the same key; a result of
	// its sum is the model's echo of it again (see echo).
	came bool
}

// echoLimit bounds durableRouter.echoes.
const echoLimit = 256

// closedQuiet bounds the streams durableRouter.closed keeps without a
// pending call.
const closedQuiet = 256

// closedStream is an entry of durableRouter.closed.
type closedStream struct {
	event string // of the state frame that announces its calls: "recovered" or "restored"
	// order is durableRouter.closings when the stream was closed or, since,
	// lost its last pending call: the quiet ones quiet longest go first.
	order uint64
}

// closedLimit is the key of the timer that ends the calls of closed
// streams whose limit has passed at at.
type closedLimit struct{ at time.Time }

// flushTimer is the key of the timer that writes held chunks when no
// other frame does within flushDelay.
type flushTimer struct{}

// flushDelay bounds how long a chunk stays held while its stream is
// quiet: a pause in a streamed argument writes what came before it.
const flushDelay = time.Millisecond

func newDurableRouter(r *routerLogic, o DurabilityOptions) *durableRouter {
	d := &durableRouter{routerLogic: r, id: o.WrapperID, limit: max(o.RecoveredTimeout, 0),
		meta: &messages.Metadata{Durability: &messages.Durability{WrapperId: o.WrapperID, WrapperType: o.WrapperType}}}
	d.core.asm = &r.asm
	d.core.also = d.waitsClosed
	d.core.applied = d.quieted
	d.core.endsAlone = r.endsAlone
	r.calls.durable = true // its runtime notes every call-opening frame (see consumerCalls.note)
	r.take = d.takeCancelled
	deliver := r.d.deliver
	r.d.deliver = func(c actors.WrapperContext, call, result *messages.Frame) {
		if d.ranOnClosed(call) {
			d.expectEcho(keyOf(call), result.GetPayload())
		}
		deliver(c, call, result)
	}
	return d
}

// ranOnClosed reports whether call, whose result is being delivered, is
// a call of a closed stream: one whose stream was closed when the router
// ran it (see freeze), or, for a call it answers without running it (one
// it rejects, cancels or ends), when it answers it.
func (r *durableRouter) ranOnClosed(call *messages.Frame) bool {
	if len(r.ranClosed) > 0 {
		if was, ok := r.ranClosed[call]; ok {
			delete(r.ranClosed, call)
			return was
		}
	}
	return r.isClosed(call.GetStreamId())
}

// freeze notes, for the calls running on the streams that flips reports
// (which are closed or opened next), whether their stream is closed
// now, unless it was noted already: their stream was then as it is now
// when they ran (see durableRouter.ranClosed). The dispatcher's
// outstanding calls are all the calls the router ran and has not
// answered: a router holds none back for approval (an approval gate is
// a tools loop's, see LoopOptions.Approval); one that did would have to
// note its held calls here too, or they would be judged by their
// stream as it is when they are answered.
func (r *durableRouter) freeze(flips func(stream string) bool) {
	for k, o := range r.d.outstanding {
		if _, ok := r.ranClosed[o.call]; ok || !flips(k.stream) {
			continue
		}
		if r.ranClosed == nil {
			r.ranClosed = map[*messages.Frame]bool{}
		}
		r.ranClosed[o.call] = r.isClosed(k.stream)
	}
}

// expectEcho notes that the result of call k, on a closed stream, goes to
// the model with payload (see durableRouter.echoOrder).
func (r *durableRouter) expectEcho(k callKey, payload []byte) {
	if r.echoes == nil {
		r.echoes, r.echoSeed = map[callKey]int{}, maphash.MakeSeed()
	}
	if len(r.echoOrder) >= echoLimit {
		// The oldest of those that came, whose duplicates alone the
		// router still keeps in, or else the oldest expected.
		r.forgetEcho(max(slices.IndexFunc(r.echoOrder, func(w echoWant) bool { return w.came }), 0))
	}
	r.echoes[k]++
	r.echoOrder = append(r.echoOrder, echoWant{call: k, sum: maphash.Bytes(r.echoSeed, payload)})
}

// forgetEcho forgets the echo expected at i of durableRouter.echoOrder.
func (r *durableRouter) forgetEcho(i int) {
	k := r.echoOrder[i].call
	r.echoOrder = slices.Delete(r.echoOrder, i, i+1)
	if r.echoes[k]--; r.echoes[k] == 0 {
		delete(r.echoes, k)
	}
}

// echo reports whether f, a response frame, is the model's echo of a
// result the router wrote into it for a call of a closed stream, and
// forgets what the model's end of a stream leaves nothing to expect. An
// END or ERROR that ends one of the consumer's calls alone, the stream
// going on with its others (see consumerCalls.endsAlone), forgets nothing: the
// model may yet echo there.
//
// A result is the echo only if it has the key and the payload of the one
// the router wrote: models number the calls of each response afresh
// (call_0, call_1...), so a result of the same key may be another
// call's, one the model started after it (which the model may echo
// before or after the echo), or one that ran while the model started it
// (see ranOnClosed), and that goes out. A result of another call with
// the very payload of the one expected (both cancelled alike, say)
// cannot be told from the echo: the first to come is taken for it.
//
// An echo that came is kept until the model ends the stream or starts a
// call of its key: a result of its payload until then is the model's
// echo of it again, which stays in as well. Once the model starts such a
// call, a result of that key is the new call's; and the echo of an
// ended call that came after the model started a new call of its key is
// forgotten as it comes, so that a result of the new call with its very
// payload goes out.
func (r *durableRouter) echo(f *messages.Frame) bool {
	switch f.GetType() {
	case messages.FrameType_TOOL_RESULT:
		k := keyOf(f)
		if r.echoes[k] == 0 {
			return false
		}
		var sum uint64
		hashed := false
		for i, w := range r.echoOrder {
			if w.call != k {
				continue
			}
			if !hashed {
				sum, hashed = maphash.Bytes(r.echoSeed, f.GetPayload()), true
			}
			if w.sum != sum {
				continue // another call's result of the same key
			}
			switch {
			case w.renewed:
				r.forgetEcho(i)
			case !w.came:
				r.echoOrder[i].came = true
			}
			return true
		}
	case messages.FrameType_TOOL_CALL:
		k := keyOf(f)
		if r.echoes[k] == 0 {
			return false
		}
		for i := 0; i < len(r.echoOrder); i++ {
			switch w := &r.echoOrder[i]; {
			case w.call != k:
			case w.came: // its echo came before the new call: what comes now is the new call's
				r.forgetEcho(i)
				i--
			default:
				w.renewed = true
			}
		}
	case messages.FrameType_END, messages.FrameType_ERROR:
		stream := f.GetStreamId()
		if r.calls.endsAlone(stream, f.GetToolCallId()) {
			return false // the stream goes on, and the model may yet echo there
		}
		r.echoOrder = slices.DeleteFunc(r.echoOrder, func(w echoWant) bool {
			if w.call.stream != stream {
				return false
			}
			if r.echoes[w.call]--; r.echoes[w.call] == 0 {
				delete(r.echoes, w.call)
			}
			return true
		})
	}
	return false
}

// takeCancelled persists and applies the removal of a pending call that a
// CANCEL or ABORT answers, and announces it, before its cancelled result
// leaves the router: a recovered router does not take it for pending.
func (r *durableRouter) takeCancelled(c actors.WrapperContext, e Event) {
	r.core.persist(persister(c), e)
	r.announce(c, e.StreamID, "cancelled", e.ToolCallID)
}

// persister returns the Persister of the turn c belongs to.
func persister(c actors.Context) actors.Persister {
	p, ok := actors.PersisterOf(c)
	if !ok {
		c.Fail(errors.New("durable router: not running as a persistent duplex"))
	}
	return p
}

// flush writes and applies the held chunks: every turn other than a
// chunk's starts with it, so nothing leaves the router before the events
// decided before it are durable.
func (r *durableRouter) flush(c actors.Context) {
	if r.core.holding() {
		r.core.flush(persister(c))
	}
}

// Request implements actors.Wrapped: restore frames addressed to this
// router are consumed.
func (r *durableRouter) Request(c actors.WrapperContext, f *messages.Frame) {
	raw, ok := f.RestoreState()
	if !ok || (f.GetMeta().GetDurability().GetWrapperId() != "" && f.GetMeta().GetDurability().GetWrapperId() != r.id) {
		r.flush(c)
		if t := f.GetType(); t != messages.FrameType_META && actors.OpensStream(t) {
			r.opened(c, f.GetStreamId())
		}
		r.routerLogic.Request(c, f)
		return
	}
	var st messages.RouterState
	if err := proto.Unmarshal(raw, &st); err != nil {
		r.flush(c)
		if r.isClosed(f.GetStreamId()) { // nothing goes out on it: the log says what happened
			c.Logger().Warn("restore frame on a closed stream not decoded", "router", r.id,
				"stream", f.GetStreamId(), "error", err)
			return
		}
		r.emit(c, messages.Meta(f.GetStreamId(), "restore_error", mustJSON(map[string]string{"error": err.Error()})))
		return
	}
	r.restoreWaits(f.GetStreamId(), &st)
	var busy []string // the closed streams with calls, which the restore may drop
	for stream := range r.closed {
		if r.asm.Pending.InStream(stream) > 0 {
			busy = append(busy, stream)
		}
	}
	r.core.persist(persister(c), Event{Kind: EventRestored, State: &st})
	slices.Sort(busy)
	for _, stream := range busy {
		r.quiet(stream)
	}
	r.closeRestored(c, f.GetStreamId())
	r.announceAll(c, "restored")
}

// Response implements actors.Wrapped: decide, persist, apply, act.
func (r *durableRouter) Response(c actors.WrapperContext, f *messages.Frame) {
	if len(r.echoes) > 0 && r.echo(f) {
		return
	}
	if r.core.hold(f) { // the hot path: an argument chunk
		switch {
		case r.core.full():
			r.flush(c)
		case !r.timer && r.core.holding():
			r.timer = true
			c.After(flushDelay, flushTimer{})
		}
		return
	}
	e, decisions := r.core.step(persister(c), f)
	if r.isClosed(f.GetStreamId()) { // nothing goes out on it (the calls' results go to the model)
		decisions = slices.DeleteFunc(decisions, func(d Decision) bool { return d.Kind == Pass })
	}
	switch e.Kind {
	case EventCallStarted:
		if r.isClosed(e.StreamID) { // it waits there (see waitsClosed)
			r.armLimit(c)
		}
		r.announce(c, e.StreamID, "started", e.ToolCallID)
	case EventCallCompleted:
		r.announce(c, e.StreamID, "completed", e.ToolCallID)
	case EventCallEnded: // before the END passes
		r.announce(c, e.StreamID, "call_ended", e.ToolCallID)
	case EventStreamEnded: // before the END passes
		r.announce(c, e.StreamID, "stream_ended", "")
	}
	r.act(c, f, decisions)
}

// HandleMessage implements actors.MessageHandler: recovery replays stored
// events (and the snapshot) through Apply; snapshots; the flush timer;
// then the router's own messages.
func (r *durableRouter) HandleMessage(c actors.WrapperContext, msg any) {
	if e, ok := eventOf(msg); ok {
		r.asm.Pending.Apply(e)
		return
	}
	switch m := msg.(type) {
	case *persistence.ReplayComplete:
		r.recovered(c)
	case *persistence.RequestSnapshot: // from inside a write: the state before it
		persister(c).PersistSnapshot(r.asm.Pending.State())
	case actors.Timer:
		switch m.Key.(type) {
		case flushTimer:
			r.timer = false
			r.flush(c)
			return
		case closedLimit:
			r.flush(c)
			if m.Key.(closedLimit).at.Equal(r.armed) {
				r.endClosed(c)
			}
			return
		}
		r.flush(c)
		r.routerLogic.HandleMessage(c, msg)
	default:
		r.flush(c)
		r.routerLogic.HandleMessage(c, msg)
	}
}

// OnFailure implements actors.WrapperFailureHandler: the chunks held when
// the incarnation ends are written, so the next one, which may get later
// chunks of the same calls, recovers them. (A write that failed is not
// held any more: it is not retried.)
func (r *durableRouter) OnFailure(c actors.WrapperContext, _ error) { r.flush(c) }

// recovered closes, once the recovery is complete, the streams of the
// calls it recovered, which the restart closed towards the consumer, and
// sets the timer of their limit. Their closed times are persisted first:
// a call's limit counts from the recovery that first closed its stream,
// whatever restarts come after (one loaded without a closed time, from a
// state stored before it had one, waits from this recovery).
func (r *durableRouter) recovered(c actors.WrapperContext) {
	if r.asm.Pending.Len() == 0 {
		return
	}
	r.closeStreams(c, "recovered", func(string) bool { return true })
}

// closeRestored closes the streams of the calls a restore frame on stream
// put there (as a restart closes those of the calls it recovers) that the
// consumer has no call open on, but stream, to which the restore is
// answered, unless it is closed already (see closesRestored): their calls
// wait for their stream to be written on, within the limit, from the
// restore (see restoreWaits).
func (r *durableRouter) closeRestored(c actors.WrapperContext, stream string) {
	r.closeStreams(c, "restored", func(s string) bool { return r.closesRestored(stream, s) })
}

// closesRestored reports whether a restore frame on stream closes s, a
// stream it puts calls on (see closeRestored).
func (r *durableRouter) closesRestored(stream, s string) bool {
	if s == stream && !r.isClosed(s) {
		return false
	}
	return !r.calls.has(s)
}

// restoreWaits sets in st, the state of a restore frame on stream, the
// closed times (see messages.ClosedStream) of the streams whose calls
// the restore puts on closed streams (see closeRestored): now, for all
// of them, whatever the frame said. They are thus persisted with the
// restore, in one event, before anything of it goes out.
func (r *durableRouter) restoreWaits(stream string, st *messages.RouterState) {
	st.Closed = nil
	if r.limit <= 0 {
		return
	}
	now := time.Now().UnixNano()
	seen := map[string]struct{}{}
	for _, pc := range st.GetCalls() {
		s := pc.GetStreamId()
		if _, dup := seen[s]; dup {
			continue
		}
		seen[s] = struct{}{}
		if r.closesRestored(stream, s) {
			st.Closed = append(st.Closed, &messages.ClosedStream{StreamId: s, ClosedAt: now})
		}
	}
	slices.SortFunc(st.Closed, func(a, b *messages.ClosedStream) int { return cmp.Compare(a.GetStreamId(), b.GetStreamId()) })
}

// closeStreams closes the streams with pending calls that close reports,
// for event, persists when the calls of those whose calls did not wait
// yet began to, and sets the timer of the limit.
func (r *durableRouter) closeStreams(c actors.WrapperContext, event string, close func(string) bool) {
	p := &r.asm.Pending
	if len(r.d.outstanding) > 0 {
		r.freeze(func(s string) bool { return !r.isClosed(s) && p.InStream(s) > 0 && close(s) })
	}
	for stream := range p.byStream {
		if !close(stream) {
			continue
		}
		if r.closed == nil {
			r.closed = make(map[string]closedStream, len(p.byStream))
		}
		r.closings++
		r.closed[stream] = closedStream{event: event, order: r.closings}
	}
	r.pruneClosed()
	var events []Event
	if r.limit > 0 {
		now := time.Now().UnixNano()
		for stream := range p.byStream {
			if _, waits := p.closedAt[stream]; !waits && r.isClosed(stream) {
				events = append(events, Event{Kind: EventStreamClosed, StreamID: stream, ClosedAt: now})
			}
		}
	}
	if len(events) > 0 {
		slices.SortFunc(events, func(a, b Event) int { return cmp.Compare(a.StreamID, b.StreamID) })
		r.core.persistAll(persister(c), events)
	}
	r.armLimit(c)
}

// waitsClosed is the durable core's also (see durableCore): for e, the
// start of a call the model makes on a closed stream, the event that
// persists, in the same store call, when the call began to wait, unless
// the calls recovered there wait still. It waits for the stream to be
// written on as they do, and is ended with them, or at its own limit when
// none was left, rather than pending until an END of the model that may
// never come. Any other event has none.
func (r *durableRouter) waitsClosed(e Event) Event {
	if e.Kind != EventCallStarted || r.limit <= 0 || !r.isClosed(e.StreamID) {
		return Event{}
	}
	if _, waits := r.asm.Pending.closedAt[e.StreamID]; waits {
		return Event{}
	}
	return Event{Kind: EventStreamClosed, StreamID: e.StreamID, ClosedAt: time.Now().UnixNano()}
}

// armLimit sets the limit timer for the earliest end of the calls waiting
// on closed streams, unless one is set for that time or before. Those
// that wait from a time ahead of the wall clock wait from now (see
// restampAhead).
func (r *durableRouter) armLimit(c actors.WrapperContext) {
	if r.limit <= 0 || len(r.closed) == 0 {
		return
	}
	r.restampAhead(c)
	var first int64
	waiting := false
	for stream, at := range r.asm.Pending.closedAt {
		if r.isClosed(stream) && (!waiting || at < first) {
			first, waiting = at, true
		}
	}
	if !waiting {
		return
	}
	at := time.Unix(0, first).Add(r.limit)
	if !r.armed.IsZero() && !at.Before(r.armed) {
		return
	}
	r.armed = at
	c.After(max(time.Until(at), 0), closedLimit{at})
}

// restampAhead persists now as the time the calls of the closed streams
// whose time is ahead of the wall clock (the clock was set back since)
// began to wait: they wait RecoveredTimeout from now, and from now at the
// next restarts, instead of until the clock catches up, which may be
// years after a clock reset.
func (r *durableRouter) restampAhead(c actors.WrapperContext) {
	now := time.Now().UnixNano()
	var ahead []string
	for stream, at := range r.asm.Pending.closedAt {
		if at > now && r.isClosed(stream) {
			ahead = append(ahead, stream)
		}
	}
	if len(ahead) == 0 {
		return
	}
	slices.Sort(ahead)
	events := make([]Event, 0, 2*len(ahead))
	for _, stream := range ahead {
		events = append(events, Event{Kind: EventStreamOpened, StreamID: stream},
			Event{Kind: EventStreamClosed, StreamID: stream, ClosedAt: now})
	}
	r.core.persistAll(persister(c), events)
}

// quieted is the durable core's applied (see durableCore): it notes when
// a closed stream loses its last pending call (a call completed or ended,
// its stream ended), which orders the quiet ones (see pruneClosed).
func (r *durableRouter) quieted(e Event) {
	if len(r.closed) > 0 && (e.Kind == EventCallCompleted || e.Kind == EventCallEnded || e.Kind == EventStreamEnded) {
		r.quiet(e.StreamID)
	}
}

// quiet notes that stream, if it is closed and has no pending call left,
// has just lost its last one.
func (r *durableRouter) quiet(stream string) {
	cs, ok := r.closed[stream]
	if !ok || r.asm.Pending.InStream(stream) > 0 {
		return
	}
	r.closings++
	cs.order = r.closings
	r.closed[stream] = cs
}

// pruneClosed forgets, of the closed streams without a pending call left,
// all but the closedQuiet that lost their last call last: a stream
// forgotten is open again, and the model's frames on it go out (a call
// the model starts there is announced, and waits for its END as on any
// stream). A stream quiet
// that long has had its calls ended, or dropped by a later restore: its
// model has mostly moved on. The closed streams with pending calls are
// all kept: there are no more of them than the state has streams. It
// runs when streams are closed, the only time there are more.
func (r *durableRouter) pruneClosed() {
	if len(r.closed) > closedQuiet {
		if len(r.d.outstanding) > 0 { // the streams forgotten open
			r.freeze(func(s string) bool { return r.isClosed(s) && r.idle(s) })
		}
		prune.Oldest(r.closed, closedQuiet, func(stream string, _ closedStream) bool { return r.idle(stream) },
			func(cs closedStream) uint64 { return cs.order })
	}
}

// idle reports whether stream holds no pending call: its entry in closed
// may be forgotten.
func (r *durableRouter) idle(stream string) bool {
	return r.asm.Pending.InStream(stream) == 0
}

// isClosed reports whether stream is closed towards the consumer (see
// durableRouter.closed).
func (r *durableRouter) isClosed(stream string) bool {
	if len(r.closed) == 0 {
		return false
	}
	_, ok := r.closed[stream]
	return ok
}

// opened notes that the consumer wrote a frame that opens a call (as the
// runtime counts it) on stream (routerLogic.Request notes the call in
// routerLogic.calls). If the stream is closed, the consumer has come back
// to it: it opens, its calls wait no more (persisted first), and the
// calls there that are still pending are announced.
func (r *durableRouter) opened(c actors.WrapperContext, stream string) {
	if len(r.closed) == 0 {
		return
	}
	cs, ok := r.closed[stream]
	if !ok {
		return
	}
	if len(r.d.outstanding) > 0 {
		r.freeze(func(s string) bool { return s == stream })
	}
	delete(r.closed, stream)
	calls := r.asm.Pending.inStream(stream)
	if len(calls) == 0 {
		return
	}
	if _, waits := r.asm.Pending.closedAt[stream]; waits {
		// Persisted before the calls are announced: the consumer told
		// they wait is not met, after a crash, by a restart that ends
		// them at once for a limit it did meet.
		r.core.persist(persister(c), Event{Kind: EventStreamOpened, StreamID: stream})
	}
	ids := make([]string, len(calls))
	for i, pc := range calls {
		ids[i] = pc.ToolCallID
	}
	r.emit(c, messages.Meta(stream, MetaState, mustJSON(stateChange{Event: cs.event,
		StreamPending: len(ids), Pending: r.asm.Pending.Len(), ToolCallIDs: ids})))
}

// endClosed ends the calls still pending on closed streams whose limit
// has passed: their removal is persisted, then their error results go to
// the model. The streams stay closed: the model may echo the results,
// and nothing goes out on them until the consumer comes back. The timer
// is then set for the next calls to end.
func (r *durableRouter) endClosed(c actors.WrapperContext) {
	r.armed = time.Time{}
	var ended []*PendingCall
	due := time.Now().Add(-r.limit).UnixNano()
	for stream, at := range r.asm.Pending.closedAt {
		if r.isClosed(stream) && at <= due {
			ended = append(ended, r.asm.Pending.inStream(stream)...)
		}
	}
	if len(ended) == 0 {
		r.armLimit(c)
		return
	}
	slices.SortFunc(ended, func(a, b *PendingCall) int { return cmp.Compare(a.Seq, b.Seq) })
	events := make([]Event, len(ended))
	calls := make([]*messages.Frame, len(ended))
	for i, pc := range ended {
		events[i] = Event{Kind: EventCallCompleted, StreamID: pc.StreamID, ToolCallID: pc.ToolCallID}
		calls[i] = pc.frame()
	}
	r.core.persistAll(persister(c), events)
	c.Logger().Warn("recovered or restored tool calls ended: their streams were not written on again",
		"router", r.id, "calls", len(calls), "within", r.limit)
	for _, call := range calls {
		why := "the router restarted, and stream %s was not written on again within %v"
		if r.closed[call.GetStreamId()].event == "restored" {
			why = "a restore frame put it on stream %s, which was not written on within %v"
		}
		r.d.deliver(c, call, errorResult(call, FailureStopped, fmt.Sprintf(
			"Tool %s stopped before its arguments were complete: "+why,
			call.GetName(), call.GetStreamId(), r.limit)))
	}
	r.armLimit(c)
}

// stateChange is the payload of a META state frame.
type stateChange struct {
	Event         string   `json:"event"`
	ToolCallID    string   `json:"tool_call_id,omitempty"`
	StreamPending int      `json:"stream_pending"`
	Pending       int      `json:"pending"`
	ToolCallIDs   []string `json:"tool_call_ids,omitempty"`
}

// announce emits a state frame on stream, after a change was applied,
// unless the stream is closed.
func (r *durableRouter) announce(c actors.WrapperContext, stream, event, id string) {
	if r.isClosed(stream) {
		return
	}
	p := &r.asm.Pending
	r.emit(c, messages.Meta(stream, MetaState, stateChange{Event: event, ToolCallID: id,
		StreamPending: p.InStream(stream), Pending: p.Len()}.json()))
}

// json encodes sc as messages.Marshal does, without reflection for the state
// frames of each call (event and tool_call_id are JSON strings as they
// are, without escaping, or sc goes through json.Marshal).
func (sc stateChange) json() json.RawMessage {
	if sc.ToolCallIDs != nil || !plainJSON(sc.Event) || !plainJSON(sc.ToolCallID) {
		return mustJSON(sc)
	}
	b := make([]byte, 0, 64+len(sc.Event)+len(sc.ToolCallID))
	b = append(append(append(b, `{"event":"`...), sc.Event...), '"')
	if sc.ToolCallID != "" {
		b = append(append(append(b, `,"tool_call_id":"`...), sc.ToolCallID...), '"')
	}
	b = strconv.AppendInt(append(b, `,"stream_pending":`...), int64(sc.StreamPending), 10)
	b = strconv.AppendInt(append(b, `,"pending":`...), int64(sc.Pending), 10)
	return append(b, '}')
}

// plainJSON reports whether s is a JSON string's contents as it is: no
// byte that encoding/json escapes or may (quote, backslash, controls,
// <, >, &, anything not ASCII); the others go through mustJSON.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// announceAll emits a state frame listing the pending calls on each
// stream that has some, but the closed ones.
func (r *durableRouter) announceAll(c actors.WrapperContext, event string) {
	p := &r.asm.Pending
	byStream := map[string][]string{}
	var order []string
	for _, pc := range p.Snapshot() {
		if r.isClosed(pc.StreamID) {
			continue
		}
		if _, ok := byStream[pc.StreamID]; !ok {
			order = append(order, pc.StreamID)
		}
		byStream[pc.StreamID] = append(byStream[pc.StreamID], pc.ToolCallID)
	}
	for _, stream := range order {
		ids := byStream[stream]
		r.emit(c, messages.Meta(stream, MetaState, mustJSON(stateChange{Event: event,
			StreamPending: len(ids), Pending: p.Len(), ToolCallIDs: ids})))
	}
}

func (r *durableRouter) emit(c actors.WrapperContext, f *messages.Frame) {
	f.Meta = r.meta
	c.ToOuter(f)
}

func mustJSON(v any) json.RawMessage {
	b, err := messages.Marshal(v) // without HTML escaping: a held call's arguments as written
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // only plain structs and maps of strings
	}
	return b
}
