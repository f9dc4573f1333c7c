package durability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// DefaultSnapshotInterval is the snapshot interval used when
// [ProviderOptions].SnapshotInterval is zero.
const DefaultSnapshotInterval = 100

// anyTypeURLPrefix is the prefix of the type URLs written into stored Any
// messages, the one anypb.New uses.
const anyTypeURLPrefix = "type.googleapis.com/"

// TypeResolver finds message types by the URL stored with each event and
// snapshot. *protoregistry.Types implements it.
type TypeResolver interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
}

// ProviderOptions configures [NewProvider]. A nil *ProviderOptions and the
// zero value both mean defaults.
type ProviderOptions struct {
	// SnapshotInterval is N in "request a snapshot every N events" (the
	// first request comes after event 0). Zero means
	// DefaultSnapshotInterval; negative values are rejected. The interval
	// handed to protoactor is never 0, which would make it divide by zero.
	SnapshotInterval int

	// Timeout bounds each store call. Zero means no timeout. A write that
	// the store has accepted is not abandoned on timeout (see [Store]).
	Timeout time.Duration

	// Resolver maps stored type URLs to message types. Nil means
	// protoregistry.GlobalTypes, where every linked-in generated message
	// type is registered.
	Resolver TypeResolver

	// Logger receives a record for each store failure before it is raised.
	// Nil discards.
	Logger *slog.Logger
}

// Provider adapts a [Store] to protoactor's persistence.Provider and
// persistence.ProviderState, for use with persistence.Using and
// persistence.Mixin. Events and snapshots are stored as serialized
// google.protobuf.Any messages, so GetEvents and GetSnapshot hand the actor
// the concrete message types it persisted, found through the resolver.
//
// # Failures become actor failures
//
// protoactor's provider methods cannot return errors, and dropping a failed
// write would break "persist before you act". So every method of Provider
// that meets an error panics with a *[StoreError] (the store's error, or
// one with Op [OpEncode] or [OpDecode]). protoactor calls these methods from
// inside the persistent actor's Receive (PersistReceive, PersistSnapshot)
// or its start-up (recovery on actor.Started), where the mailbox recovers
// the panic and escalates it: the actor's supervisor gets the *StoreError as
// the failure reason and decides (restart, stop, escalate) with errors.As.
// The message that was being persisted is not applied, because the panic
// unwinds before the actor's code after PersistReceive runs. Calling these
// methods outside an actor turns a store failure into a plain panic.
//
// # Persist, then apply
//
// protoactor takes a snapshot from inside PersistReceive, before the actor
// applies the event being persisted, and stores it at that event's index;
// recovery then loads the snapshot and replays events from that same index.
// So a snapshot must hold the state BEFORE the triggering event: an actor
// calls PersistReceive(event) first and applies the event afterwards. An
// actor that applies first and persists second has the event inside the
// snapshot and replayed after it, i.e. applied twice on recovery.
//
// A second protoactor detail: PersistReceive delivers RequestSnapshot to the
// actor through a nested Receive, after which the actor.Context no longer
// holds the current message. Read ctx.Sender() (and anything else taken
// from the context's message) before calling PersistReceive.
//
// # Encoding buffers
//
// Events and snapshots are encoded into pooled buffers that are reused as
// soon as the store call returns, so the hot path allocates nothing of its
// own. This relies on the [Store] contract: a store copies what it keeps
// and does not retain the slice it was given.
//
// A Provider is safe for concurrent use by many actors; it does not own the
// Store (closing the store is the caller's job, after the actors using it
// have stopped). The zero value is not usable; create one with NewProvider.
type Provider struct {
	store    Store
	interval int
	timeout  time.Duration
	unmarsh  proto.UnmarshalOptions
	log      *slog.Logger
	header   atomic.Pointer[anyHeader] // of the last type encoded
}

// anyHeader is the start of the Any encoding of a message of type name:
// its type_url field and the tag of its value field.
type anyHeader struct {
	name protoreflect.FullName
	b    []byte
}

var (
	_ persistence.Provider      = (*Provider)(nil)
	_ persistence.ProviderState = (*Provider)(nil)
)

// NewProvider returns a Provider over store. opts may be nil.
func NewProvider(store Store, opts *ProviderOptions) (*Provider, error) {
	if store == nil {
		return nil, errors.New("new provider: nil store")
	}
	var o ProviderOptions
	if opts != nil {
		o = *opts
	}
	if o.SnapshotInterval < 0 {
		return nil, fmt.Errorf("new provider: snapshot interval %d, want >= 1 (0 for the default)", o.SnapshotInterval)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("new provider: negative timeout %v", o.Timeout)
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.Resolver == nil {
		o.Resolver = protoregistry.GlobalTypes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provider{
		store:    store,
		interval: o.SnapshotInterval,
		timeout:  o.Timeout,
		unmarsh:  proto.UnmarshalOptions{Resolver: o.Resolver},
		log:      o.Logger,
	}, nil
}

// GetState implements persistence.Provider; it returns p.
func (p *Provider) GetState() persistence.ProviderState { return p }

// Restart implements persistence.ProviderState; it does nothing.
func (p *Provider) Restart() {}

// GetSnapshotInterval implements persistence.ProviderState.
func (p *Provider) GetSnapshotInterval() int { return p.interval }

// GetSnapshot implements persistence.SnapshotStore. It panics with a
// *StoreError if the store fails or the snapshot cannot be decoded.
func (p *Provider) GetSnapshot(actorName string) (snapshot any, eventIndex int, ok bool) {
	ctx, cancel := p.context()
	defer cancel()
	snap, ok, err := p.store.GetSnapshot(ctx, actorName)
	if err != nil {
		p.fail(storeError(OpGetSnapshot, actorName, err))
	}
	if !ok {
		return nil, 0, false
	}
	if snap.Index > math.MaxInt {
		p.fail(&StoreError{Op: OpDecode, Name: actorName, Err: fmt.Errorf("snapshot index %d overflows int", snap.Index)})
	}
	msg, err := p.decode(snap.Data)
	if err != nil {
		p.fail(&StoreError{Op: OpDecode, Name: actorName, Err: fmt.Errorf("snapshot at %d: %w", snap.Index, err)})
	}
	return msg, int(snap.Index), true
}

// PersistSnapshot implements persistence.SnapshotStore. It returns once the
// snapshot is durable and panics with a *StoreError otherwise.
func (p *Provider) PersistSnapshot(actorName string, snapshotIndex int, snapshot proto.Message) {
	index := p.index(OpPersistSnapshot, actorName, snapshotIndex)
	p.persist(OpPersistSnapshot, actorName, "snapshot at", index, snapshot, p.store.PersistSnapshot)
}

// DeleteSnapshots implements persistence.SnapshotStore. It panics with a
// *StoreError if the store fails.
func (p *Provider) DeleteSnapshots(actorName string, inclusiveToIndex int) {
	through := p.index(OpDeleteSnapshots, actorName, inclusiveToIndex)
	ctx, cancel := p.context()
	defer cancel()
	if err := p.store.DeleteSnapshots(ctx, actorName, through); err != nil {
		p.fail(storeError(OpDeleteSnapshots, actorName, err))
	}
}

// GetEvents implements persistence.EventStore: it calls callback with each
// decoded event with eventIndexStart <= index < eventIndexEnd, where an
// eventIndexEnd of 0 means no upper bound. It panics with a *StoreError if
// the store fails or an event cannot be decoded.
//
// The events must run without a gap from eventIndexStart: recovery
// (protoactor's Mixin, the actors package) numbers the events it replays
// by counting them from there and persists its next event at the count,
// so a missing event would shift every later one onto a lower index, its
// state would lack the event and its next write would overwrite a stored
// one. An event missing before the last one stored (deleted without a
// snapshot that covers it, or the covering snapshot deleted) panics with
// a *StoreError (Op [OpGetEvents]) that names the actor and the missing
// index, and no event past the gap is delivered.
func (p *Provider) GetEvents(actorName string, eventIndexStart int, eventIndexEnd int, callback func(e any)) {
	from := p.index(OpGetEvents, actorName, eventIndexStart)
	to := p.index(OpGetEvents, actorName, eventIndexEnd)
	ctx, cancel := p.context()
	defer cancel()
	next := from
	err := p.store.GetEvents(ctx, actorName, from, to, func(index uint64, data []byte) error {
		if index != next {
			return &StoreError{Op: OpGetEvents, Name: actorName,
				Err: fmt.Errorf("event %d missing (the next one stored is %d): replaying past it would apply the later events to the wrong state", next, index)}
		}
		next++
		msg, err := p.decode(data)
		if err != nil {
			return &StoreError{Op: OpDecode, Name: actorName, Err: fmt.Errorf("event %d: %w", index, err)}
		}
		callback(msg)
		return nil
	})
	if err != nil {
		p.fail(storeError(OpGetEvents, actorName, err))
	}
}

// PersistEvent implements persistence.EventStore. It returns once the event
// is durable and panics with a *StoreError otherwise.
func (p *Provider) PersistEvent(actorName string, eventIndex int, event proto.Message) {
	p.persist(OpPersistEvent, actorName, "event", p.index(OpPersistEvent, actorName, eventIndex), event, p.store.PersistEvent)
}

// PersistEvents stores events at firstIndex, firstIndex+1, … in one call
// of the store's PersistEvents (one durable write), for an actor that
// persists the events of one turn together (see actors.BatchProvider). It
// returns once they are all durable and panics with a *StoreError
// otherwise; none is stored then.
func (p *Provider) PersistEvents(actorName string, firstIndex int, events []proto.Message) {
	first := p.index(OpPersistEvents, actorName, firstIndex)
	bp := batchBuffers.Get().(*batchBuffer)
	defer bp.put()
	// Room for the whole batch at once: a large event (a long argument)
	// is then copied once, not again each time the buffer grows.
	need := 0
	for _, e := range events {
		need += anySize(e)
	}
	buf := bp.data[:0]
	if cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	bp.ends = bp.ends[:0]
	for k, e := range events {
		var err error
		if buf, err = p.appendAny(buf, e); err != nil {
			bp.data = buf
			p.fail(&StoreError{Op: OpEncode, Name: actorName, Err: fmt.Errorf("event %d: %w", first+uint64(k), err)})
		}
		bp.ends = append(bp.ends, len(buf))
	}
	bp.data = buf
	bp.parts = bp.parts[:0]
	start := 0
	for _, end := range bp.ends {
		bp.parts = append(bp.parts, buf[start:end:end])
		start = end
	}
	ctx, cancel := p.context()
	err := p.store.PersistEvents(ctx, actorName, first, bp.parts)
	cancel()
	if err != nil {
		p.fail(storeError(OpPersistEvents, actorName, err))
	}
}

// batchBuffer holds the encoding of one batch of events.
type batchBuffer struct {
	data  []byte
	ends  []int
	parts [][]byte
}

var batchBuffers = sync.Pool{New: func() any { return new(batchBuffer) }}

func (b *batchBuffer) put() {
	clear(b.parts) // keep no slices of a buffer that may be dropped
	if cap(b.data) <= maxPooledBuffer {
		batchBuffers.Put(b)
	}
}

// DeleteEvents implements persistence.EventStore. It panics with a
// *StoreError if the store fails.
func (p *Provider) DeleteEvents(actorName string, inclusiveToIndex int) {
	through := p.index(OpDeleteEvents, actorName, inclusiveToIndex)
	ctx, cancel := p.context()
	defer cancel()
	if err := p.store.DeleteEvents(ctx, actorName, through); err != nil {
		p.fail(storeError(OpDeleteEvents, actorName, err))
	}
}

func (p *Provider) context() (context.Context, context.CancelFunc) {
	if p.timeout > 0 {
		return context.WithTimeout(context.Background(), p.timeout)
	}
	return context.Background(), func() {}
}

// index converts protoactor's int index, failing on negative values.
func (p *Provider) index(op, name string, i int) uint64 {
	if i < 0 {
		p.fail(&StoreError{Op: op, Name: name, Err: fmt.Errorf("negative index %d", i)})
	}
	return uint64(i)
}

// storeError returns err, the error of a store's op for the actor name,
// as a *StoreError: as it is if it is one (as the [Store] contract
// says), else wrapped in one that names op and name, so that a
// supervisor learns which actor failed even from a store that breaks the
// contract.
func storeError(op, name string, err error) error {
	var se *StoreError
	if err == nil || errors.As(err, &se) {
		return err
	}
	return &StoreError{Op: op, Name: name, Err: err}
}

// fail logs err and raises it as the actor's failure. Store errors are
// *StoreError already (see storeError); anything else is wrapped so that
// supervisors can rely on the type.
func (p *Provider) fail(err error) {
	var se *StoreError
	if !errors.As(err, &se) {
		se = &StoreError{Op: "store", Err: err}
	}
	p.log.Error("durability store failed; raising it as an actor failure",
		"op", se.Op, "name", se.Name, "err", se.Err, "retryable", se.Retryable())
	panic(se)
}

// encodeBuffers holds the buffers events and snapshots are encoded into.
// A store copies what it keeps (see [Store]), so a buffer is reused as soon
// as the store call returns, and the hot path allocates nothing of its own.
var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuffer is the capacity above which a buffer (a large snapshot's)
// is left to the garbage collector instead of being pooled.
const maxPooledBuffer = 64 << 10

// persist encodes msg and hands it to write, the store's op, raising
// encoding and store failures as *StoreError. what names the event or
// snapshot in errors.
func (p *Provider) persist(op, name, what string, index uint64, msg proto.Message,
	write func(ctx context.Context, name string, index uint64, data []byte) error) {
	buf := encodeBuffers.Get().(*[]byte)
	data, err := p.appendAny((*buf)[:0], msg)
	if err != nil {
		encodeBuffers.Put(buf)
		p.fail(&StoreError{Op: OpEncode, Name: name, Err: fmt.Errorf("%s %d: %w", what, index, err)})
	}
	ctx, cancel := p.context()
	err = write(ctx, name, index, data)
	cancel()
	if cap(data) <= maxPooledBuffer {
		*buf = data
		encodeBuffers.Put(buf)
	}
	if err != nil {
		p.fail(storeError(op, name, err))
	}
}

// anySize is the size of msg's encoding as appendAny writes it (0 for
// nil): the Any's type_url field, then its value field holding msg.
func anySize(msg proto.Message) int {
	if msg == nil {
		return 0
	}
	var size int
	if a, ok := msg.(Appender); ok {
		size = a.ProtoSize()
	} else {
		size = proto.Size(msg)
	}
	url := len(anyTypeURLPrefix) + len(msg.ProtoReflect().Descriptor().FullName())
	return protowire.SizeTag(1) + protowire.SizeBytes(url) + protowire.SizeTag(2) + protowire.SizeBytes(size)
}

// Appender is an event that encodes itself: the Provider appends
// AppendProto's bytes instead of running protobuf's generic marshaling,
// for the small events an actor persists by the thousand (a streaming
// router's argument chunks). AppendProto must append exactly the bytes
// proto.Marshal makes of the message ProtoReflect returns, ProtoSize
// being their length: the stored event is read back as that message.
type Appender interface {
	proto.Message
	ProtoSize() int
	AppendProto(b []byte) []byte
}

// appendAny appends msg serialized as a google.protobuf.Any (type_url = 1,
// value = 2) to b, writing the message straight into the Any's value
// instead of building an anypb.Any and marshaling twice (an [Appender]
// writes itself). The type_url field of the last type encoded is kept: a
// durable actor mostly persists one type of event.
func (p *Provider) appendAny(b []byte, msg proto.Message) ([]byte, error) {
	if msg == nil {
		return b, errors.New("nil message")
	}
	name := msg.ProtoReflect().Descriptor().FullName()
	h := p.header.Load()
	if h == nil || h.name != name {
		hb := protowire.AppendTag(nil, 1, protowire.BytesType)
		hb = protowire.AppendVarint(hb, uint64(len(anyTypeURLPrefix)+len(name)))
		hb = append(append(hb, anyTypeURLPrefix...), name...)
		h = &anyHeader{name: name, b: protowire.AppendTag(hb, 2, protowire.BytesType)}
		p.header.Store(h)
	}
	if a, ok := msg.(Appender); ok {
		size := a.ProtoSize()
		b = append(b, h.b...)
		b = protowire.AppendVarint(b, uint64(size))
		start := len(b)
		if b = a.AppendProto(b); len(b)-start != size {
			return b, fmt.Errorf("%s appended %d bytes, said %d", name, len(b)-start, size)
		}
		return b, nil
	}
	size := proto.Size(msg)
	b = append(b, h.b...)
	b = protowire.AppendVarint(b, uint64(size))
	start := len(b)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, msg)
	if err != nil {
		return b, err
	}
	if len(b)-start != size {
		return b, fmt.Errorf("%s changed while being encoded", name)
	}
	return b, nil
}

// Decode turns the bytes of a stored event or snapshot (a serialized
// google.protobuf.Any, as the Provider writes them) back into the concrete
// message they hold, found through the resolver. It is for owners that
// read a [Store] themselves, with the errors in their hands instead of a
// panic.
func (p *Provider) Decode(data []byte) (proto.Message, error) { return p.decode(data) }

// decode turns stored bytes back into the concrete message they hold.
func (p *Provider) decode(data []byte) (proto.Message, error) {
	var a anypb.Any
	if err := proto.Unmarshal(data, &a); err != nil {
		return nil, err
	}
	return anypb.UnmarshalNew(&a, p.unmarsh)
}
