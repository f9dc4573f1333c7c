package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
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
// pending, a restore) is persisted as a protobuf event
// (messages.RouterCallStarted, RouterChunkAppended, RouterCallCompleted,
// RouterStreamEnded, RouterRestored) through protoactor's persistence
// middleware BEFORE it is applied, and a snapshot (messages.RouterState)
// is taken every SnapshotEvery events. Frames that change nothing (a chunk
// for a call that is not pending, the END of a stream without pending
// calls, atomic TOOL_CALLs) are not persisted.
//
// When the router restarts (its supervisor restarted it after a panic, or
// the process started again with the same store), it recovers its pending
// calls: later chunks of a call complete it with byte-identical arguments,
// and it runs once. As for every duplex, the streams open at a restart are
// closed towards the consumer with ERROR and END (the model adapter inside
// the router restarted too); the recovered calls complete if their chunks
// keep coming, and are answered with error results when their stream ends.
// The router's actor id (its name and its ancestors' names) is the
// persistence key: it must be the same from one run to the next.
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
// with event one of started, completed, stream_ended, and, listing the
// stream's pending call ids in "tool_call_ids", recovered (after a
// restart) and restored. A META frame written into the router whose
// meta.durability.restore_state is set, and whose wrapper_id is empty or
// WrapperID, replaces the pending calls with that snapshot (a serialized
// messages.RouterState, see [RestoreFrame]); it is persisted like any
// change and consumed, not forwarded. A restore frame that cannot be
// decoded is answered with a META frame named "restore_error".
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

// State returns the pending calls (as Snapshot) in their protobuf form,
// for snapshots and [RestoreFrame].
func (p *PendingCalls) State() *messages.RouterState {
	calls := p.Snapshot()
	st := &messages.RouterState{Calls: make([]*messages.PendingToolCall, len(calls)), LastSeq: p.seq}
	for i, c := range calls {
		st.Calls[i] = &messages.PendingToolCall{Seq: c.Seq, StreamId: c.StreamID, ToolCallId: c.ToolCallID,
			Name: c.Name, Index: c.Index, Args: c.Args}
	}
	return st
}

// RestoreState replaces the pending calls with those of st (as Restore).
func (p *PendingCalls) RestoreState(st *messages.RouterState) {
	calls := make([]PendingCall, len(st.GetCalls()))
	for i, c := range st.GetCalls() {
		calls[i] = PendingCall{Seq: c.GetSeq(), StreamID: c.GetStreamId(), ToolCallID: c.GetToolCallId(),
			Name: c.GetName(), Index: c.GetIndex(), Args: c.GetArgs()}
	}
	p.Restore(calls)
	p.seq = max(p.seq, st.GetLastSeq())
}

// durableRouter is the Wrapped of a durable router: a router whose
// assembler state changes are persisted before they are applied.
type durableRouter struct {
	*routerLogic
	meta  *messages.Metadata // the durability metadata of state frames
	id    string
	chunk messages.RouterChunkAppended // reused: the provider encodes it at once
}

func newDurableRouter(r *routerLogic, o DurabilityOptions) *durableRouter {
	return &durableRouter{routerLogic: r, id: o.WrapperID,
		meta: &messages.Metadata{Durability: &messages.Durability{WrapperId: o.WrapperID, WrapperType: o.WrapperType}}}
}

func (r *durableRouter) persister(c actors.Context) actors.Persister {
	p, ok := actors.PersisterOf(c)
	if !ok {
		c.Fail(errors.New("durable router: not running as a persistent duplex"))
	}
	return p
}

// Request implements actors.Wrapped: restore frames addressed to this
// router are consumed.
func (r *durableRouter) Request(c actors.WrapperContext, f *messages.Frame) {
	raw, ok := f.RestoreState()
	if !ok || (f.GetMeta().GetDurability().GetWrapperId() != "" && f.GetMeta().GetDurability().GetWrapperId() != r.id) {
		r.routerLogic.Request(c, f)
		return
	}
	var st messages.RouterState
	if err := proto.Unmarshal(raw, &st); err != nil {
		r.emit(c, messages.Meta(f.GetStreamId(), "restore_error", mustJSON(map[string]string{"error": err.Error()})))
		return
	}
	r.persister(c).Persist(&messages.RouterRestored{State: &st})
	r.asm.Pending.RestoreState(&st)
	r.announceAll(c, "restored")
}

// Response implements actors.Wrapped: persist the change a frame makes,
// then apply it.
func (r *durableRouter) Response(c actors.WrapperContext, f *messages.Frame) {
	if f.IsToolArgChunk() { // the hot path: one lookup, no allocation
		seq, ok := r.asm.Pending.SeqOf(f.GetStreamId(), f.GetToolCallId())
		if !ok {
			return // not pending: dropped, as the assembler does
		}
		r.chunk.Seq, r.chunk.Chunk = seq, f.GetText()
		r.persister(c).Persist(&r.chunk)
		r.asm.Pending.ChunkAppendedSeq(seq, f.GetText())
		return
	}
	ev, what := r.eventFor(f)
	if ev == nil {
		r.routerLogic.Response(c, f)
		return
	}
	r.persister(c).Persist(ev)
	if what == "stream_ended" { // announce before the END passes
		r.announce(c, f.GetStreamId(), what, "", -r.asm.Pending.InStream(f.GetStreamId()))
		r.routerLogic.Response(c, f)
		return
	}
	r.routerLogic.Response(c, f)
	r.announce(c, f.GetStreamId(), what, f.GetToolCallId(), 0)
}

// eventFor is the event that f applies to the pending calls, or nil when
// it changes nothing.
func (r *durableRouter) eventFor(f *messages.Frame) (ev proto.Message, what string) {
	p := &r.asm.Pending
	switch {
	case f.IsStreamingToolCall():
		if !p.Has(f.GetStreamId(), f.GetToolCallId()) {
			return &messages.RouterCallStarted{StreamId: f.GetStreamId(), ToolCallId: f.GetToolCallId(),
				Name: f.GetName(), Index: f.GetMeta().GetIndex()}, "started"
		}
	case f.IsToolComplete():
		if p.Has(f.GetStreamId(), f.GetToolCallId()) {
			return &messages.RouterCallCompleted{StreamId: f.GetStreamId(), ToolCallId: f.GetToolCallId()}, "completed"
		}
	case f.GetType() == messages.FrameType_END || f.GetType() == messages.FrameType_ERROR:
		if p.InStream(f.GetStreamId()) > 0 {
			return &messages.RouterStreamEnded{StreamId: f.GetStreamId()}, "stream_ended"
		}
	}
	return nil, ""
}

// HandleMessage implements actors.MessageHandler: recovery and snapshots,
// then the router's own messages.
func (r *durableRouter) HandleMessage(c actors.WrapperContext, msg any) {
	p := &r.asm.Pending
	switch m := msg.(type) {
	case *messages.RouterState:
		p.RestoreState(m)
	case *messages.RouterCallStarted:
		p.CallStarted(m.GetStreamId(), m.GetToolCallId(), m.GetName(), m.GetIndex())
	case *messages.RouterChunkAppended:
		p.ChunkAppendedSeq(m.GetSeq(), m.GetChunk())
	case *messages.RouterCallCompleted:
		p.CallCompleted(m.GetStreamId(), m.GetToolCallId())
	case *messages.RouterStreamEnded:
		p.StreamEnded(m.GetStreamId())
	case *messages.RouterRestored:
		p.RestoreState(m.GetState())
	case *persistence.ReplayComplete:
		r.announceAll(c, "recovered")
	case *persistence.RequestSnapshot:
		r.persister(c).PersistSnapshot(p.State())
	default:
		r.routerLogic.HandleMessage(c, msg)
	}
}

// stateChange is the payload of a META state frame.
type stateChange struct {
	Event         string   `json:"event"`
	ToolCallID    string   `json:"tool_call_id,omitempty"`
	StreamPending int      `json:"stream_pending"`
	Pending       int      `json:"pending"`
	ToolCallIDs   []string `json:"tool_call_ids,omitempty"`
}

// announce emits a state frame on stream. adjust corrects the stream's
// count for a change that is about to be applied.
func (r *durableRouter) announce(c actors.WrapperContext, stream, event, id string, adjust int) {
	p := &r.asm.Pending
	r.emit(c, messages.Meta(stream, MetaState, mustJSON(stateChange{Event: event, ToolCallID: id,
		StreamPending: p.InStream(stream) + adjust, Pending: p.Len() + adjust})))
}

// announceAll emits a state frame listing the pending calls on each
// stream that has some.
func (r *durableRouter) announceAll(c actors.WrapperContext, event string) {
	p := &r.asm.Pending
	byStream := map[string][]string{}
	var order []string
	for _, pc := range p.Snapshot() {
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
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // only plain structs and maps of strings
	}
	return b
}
