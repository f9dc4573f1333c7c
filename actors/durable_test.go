package actors_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// journalLogic persists each "add:x" text as an event, then applies it, and
// answers on the same stream with its entries and how many events the
// current incarnation replayed. "crash" panics.
type journalLogic struct {
	entries  []string
	replayed int
	done     bool
}

func (j *journalLogic) Receive(c actors.Context, msg any) {
	p, ok := actors.PersisterOf(c)
	if !ok {
		c.Fail(errNotPersistent)
	}
	switch m := msg.(type) {
	case *structpb.ListValue: // the snapshot
		j.entries = j.entries[:0]
		for _, v := range m.GetValues() {
			j.entries = append(j.entries, v.GetStringValue())
		}
	case *wrapperspb.StringValue: // a replayed event
		if !p.Recovering() {
			c.Fail(errNotPersistent)
		}
		j.replayed++
		j.entries = append(j.entries, m.GetValue())
	case *persistence.ReplayComplete:
		j.done = true
	case *persistence.RequestSnapshot:
		vals := make([]any, len(j.entries))
		for i, e := range j.entries {
			vals[i] = e
		}
		list, err := structpb.NewList(vals)
		if err != nil {
			c.Fail(err)
		}
		p.PersistSnapshot(list)
	case *messages.Frame:
		if m.GetText() == "crash" {
			panic("journal: asked to crash")
		}
		v, ok := strings.CutPrefix(m.GetText(), "add:")
		if !ok || !j.done {
			return
		}
		vs := strings.Split(v, "+") // several values: one turn's events, one batch
		events := make([]proto.Message, len(vs))
		for i, v := range vs {
			events[i] = wrapperspb.String(v)
		}
		if len(events) == 1 {
			p.Persist(events[0]) // persist first ...
		} else {
			p.PersistEvents(events)
		}
		j.entries = append(j.entries, vs...) // ... then apply
		c.Emit(messages.Text(m.GetStreamId(), strings.Join(j.entries, ",")+"|"+string(rune('0'+j.replayed))))
		c.Emit(messages.End(m.GetStreamId()))
	}
}

type errString string

func (e errString) Error() string { return string(e) }

const errNotPersistent = errString("journal: not persistent or not recovering")

func TestDurable_RecoversAfterRestart(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	j := startJournal(t, store, 2)
	for i, v := range []string{"a", "b", "c"} {
		j.add(string(rune('1'+i)), v)
	}
	j.crash()
	// Snapshots were taken before events 0 and 2: the new incarnation loads
	// [a b] and replays c alone.
	if got := j.add("4", "d"); got != "a,b,c,d|1" {
		t.Errorf("after restart: %q, want %q", got, "a,b,c,d|1")
	}
}

func TestPersisterOf_PlainDuplex(t *testing.T) {
	rt := newRuntime(t, nil)
	got := make(chan bool, 1)
	conn, err := rt.Start(actors.Spec{New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if _, ok := msg.(actors.Started); ok {
				_, ok := actors.PersisterOf(c)
				got <- ok
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(testCtx(t))
	if <-got {
		t.Error("PersisterOf found a persister on a plain duplex")
	}
}

// countingStore counts the store's event writes.
type countingStore struct {
	durability.Store
	single, batches atomic.Int64
	snapshots       chan uint64 // indexes of snapshots written
}

func (s *countingStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	s.snapshots <- index
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

func (s *countingStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	s.single.Add(1)
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *countingStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	s.batches.Add(1)
	return s.Store.PersistEvents(ctx, name, first, data)
}

// TestDurable_BatchIsOneWrite persists the events of one turn with
// PersistEvents: one store call for all of them, a snapshot requested
// inside the batch holds the state before it, and a new incarnation
// replays everything.
func TestDurable_BatchIsOneWrite(t *testing.T) {
	mem := memstore.New(nil)
	t.Cleanup(func() { mem.Close() })
	store := &countingStore{Store: mem, snapshots: make(chan uint64, 16)}
	j := startJournal(t, store, 3)
	j.add("1", "a")       // event 0 (snapshot of [] at 0)
	j.add("2", "b+c+d+e") // events 1-4 in one write; index 3 asks for a snapshot: [a] at 1
	if n, b := store.single.Load(), store.batches.Load(); n != 1 || b != 1 {
		t.Errorf("store calls: %d single, %d batches; want 1 and 1", n, b)
	}
	if a, b := <-store.snapshots, <-store.snapshots; a != 0 || b != 1 {
		t.Fatalf("snapshots at %d and %d, want 0 and 1 (the state before the batch at its first index)", a, b)
	}
	j.crash()
	if got := j.add("3", "f"); got != "a,b,c,d,e,f|4" {
		t.Errorf("after restart: %q, want %q (snapshot [a], 4 events replayed)", got, "a,b,c,d,e,f|4")
	}
}

// journal is a started journalLogic duplex, and the test that talks to it.
type journal struct {
	t    *testing.T
	ctx  context.Context
	conn *actors.Conn
}

// startJournal starts a journalLogic duplex persisted in store, with a
// snapshot every snapshotInterval events, on a runtime of t's.
func startJournal(t *testing.T, store durability.Store, snapshotInterval int) *journal {
	t.Helper()
	provider, err := durability.NewProvider(store, &durability.ProviderOptions{SnapshotInterval: snapshotInterval})
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, nil)
	conn, err := rt.Start(actors.Spec{Name: "journal", Persistence: provider,
		New: func() actors.Logic { return &journalLogic{} }})
	if err != nil {
		t.Fatal(err)
	}
	return &journal{t: t, ctx: testCtx(t), conn: conn}
}

// add sends "add:v" on stream and returns the journal's answer.
func (j *journal) add(stream, v string) string {
	j.t.Helper()
	if err := j.conn.Send(messages.Text(stream, "add:"+v)); err != nil {
		j.t.Fatal(err)
	}
	got, err := j.conn.RecvStream(j.ctx, stream)
	if err != nil || len(got) != 2 {
		j.t.Fatalf("stream %s: %v, %v", stream, got, err)
	}
	return got[0].GetText()
}

// crash makes the journal panic and waits for the stream's ERROR.
func (j *journal) crash() {
	j.t.Helper()
	if err := j.conn.Send(messages.Text("crash", "crash")); err != nil {
		j.t.Fatal(err)
	}
	if got, err := j.conn.RecvStream(j.ctx, "crash"); err != nil || got[0].GetType() != messages.FrameType_ERROR {
		j.t.Fatalf("crash stream: %v, %v", got, err)
	}
}
