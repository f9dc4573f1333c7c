package durability_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func newProvider(t *testing.T, s durability.Store, opts *durability.ProviderOptions) *durability.Provider {
	t.Helper()
	p, err := durability.NewProvider(s, opts)
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	return p
}

// raised runs fn and returns the *StoreError it panicked with, failing t if
// it did not panic or panicked with something else.
func raised(t *testing.T, fn func()) (se *durability.StoreError) {
	t.Helper()
	defer func() {
		r := recover()
		var ok bool
		if se, ok = r.(*durability.StoreError); !ok {
			t.Fatalf("panicked with %v (%T), want a *durability.StoreError", r, r)
		}
	}()
	fn()
	return nil
}

func TestNewProvider_Options(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	if _, err := durability.NewProvider(nil, nil); err == nil {
		t.Error("NewProvider(nil store) succeeded")
	}
	if _, err := durability.NewProvider(s, &durability.ProviderOptions{SnapshotInterval: -1}); err == nil {
		t.Error("NewProvider with a negative snapshot interval succeeded")
	}
	if _, err := durability.NewProvider(s, &durability.ProviderOptions{Timeout: -1}); err == nil {
		t.Error("NewProvider with a negative timeout succeeded")
	}
	for _, c := range []struct {
		opts *durability.ProviderOptions
		want int
	}{
		{nil, durability.DefaultSnapshotInterval},
		{&durability.ProviderOptions{}, durability.DefaultSnapshotInterval},
		{&durability.ProviderOptions{SnapshotInterval: 1}, 1},
		{&durability.ProviderOptions{SnapshotInterval: 7}, 7},
	} {
		if got := newProvider(t, s, c.opts).GetState().GetSnapshotInterval(); got != c.want {
			t.Errorf("interval with %+v = %d, want %d", c.opts, got, c.want)
		}
	}
}

func TestProvider_RoundTripsConcreteTypes(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	events := []proto.Message{
		wrapperspb.String("chunk"),
		wrapperspb.Int64(-42),
		&wrapperspb.StringValue{}, // encodes to zero bytes
		must(structpb.NewStruct(map[string]any{"a": 1.5, "b": []any{"x", true}})),
	}
	for i, e := range events {
		p.PersistEvent("rt", i, e)
	}
	var got []proto.Message
	p.GetEvents("rt", 0, 0, func(e any) { got = append(got, e.(proto.Message)) })
	if len(got) != len(events) {
		t.Fatalf("got %d events, want %d", len(got), len(events))
	}
	for i := range events {
		if !proto.Equal(got[i], events[i]) {
			t.Errorf("event %d = %v (%T), want %v (%T)", i, got[i], got[i], events[i], events[i])
		}
	}
	got = got[:0]
	p.GetEvents("rt", 1, 3, func(e any) { got = append(got, e.(proto.Message)) })
	if len(got) != 2 || !proto.Equal(got[0], events[1]) || !proto.Equal(got[1], events[2]) {
		t.Errorf("GetEvents(1, 3) = %v", got)
	}

	p.PersistSnapshot("rt", 2, wrapperspb.Bytes([]byte("state")))
	snap, index, ok := p.GetSnapshot("rt")
	if !ok || index != 2 || !proto.Equal(snap.(proto.Message), wrapperspb.Bytes([]byte("state"))) {
		t.Errorf("GetSnapshot = %v, %d, %v", snap, index, ok)
	}
	if _, _, ok := p.GetSnapshot("nobody"); ok {
		t.Error("GetSnapshot of unknown actor reported a snapshot")
	}
}

// TestProvider_StoresAny checks the stored bytes are a google.protobuf.Any
// equal to what anypb.New makes, so other tools can read the store.
func TestProvider_StoresAny(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	msg := wrapperspb.String("hello")
	newProvider(t, s, nil).PersistEvent("any", 0, msg)
	err := s.GetEvents(t.Context(), "any", 0, 0, func(_ uint64, data []byte) error {
		var got anypb.Any
		if err := proto.Unmarshal(data, &got); err != nil {
			return err
		}
		if want := must(anypb.New(msg)); !proto.Equal(&got, want) {
			t.Errorf("stored %v, want %v", &got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestProvider_DeletesPassThrough(t *testing.T) {
	s := memstore.New(&memstore.Options{KeepHistory: true})
	defer s.Close()
	p := newProvider(t, s, nil)
	for i := range 4 {
		p.PersistEvent("d", i, wrapperspb.Int32(int32(i)))
	}
	p.PersistSnapshot("d", 1, wrapperspb.String("one"))
	p.PersistSnapshot("d", 3, wrapperspb.String("three"))
	p.DeleteEvents("d", 1)
	p.DeleteSnapshots("d", 3)
	n := 0
	p.GetEvents("d", 2, 0, func(any) { n++ })
	if n != 2 {
		t.Errorf("%d events after DeleteEvents(1), want 2", n)
	}
	if events(t, s, "d") != 2 {
		t.Errorf("the store holds %d events after DeleteEvents(1), want 2", events(t, s, "d"))
	}
	if _, _, ok := p.GetSnapshot("d"); ok {
		t.Error("snapshot left after DeleteSnapshots(3)")
	}
}

func TestProvider_StoreFailuresPanicTyped(t *testing.T) {
	s := memstore.New(nil)
	p := newProvider(t, s, nil)
	s.Close()
	calls := map[string]func(){
		durability.OpPersistEvent:    func() { p.PersistEvent("x", 0, wrapperspb.String("lost?")) },
		durability.OpPersistSnapshot: func() { p.PersistSnapshot("x", 0, wrapperspb.String("lost?")) },
		durability.OpGetSnapshot:     func() { p.GetSnapshot("x") },
		durability.OpGetEvents:       func() { p.GetEvents("x", 0, 0, func(any) { t.Error("callback called") }) },
		durability.OpDeleteEvents:    func() { p.DeleteEvents("x", 0) },
		durability.OpDeleteSnapshots: func() { p.DeleteSnapshots("x", 0) },
	}
	for op, call := range calls {
		se := raised(t, call)
		if se.Op != op || se.Name != "x" || !errors.Is(se, durability.ErrClosed) {
			t.Errorf("%s raised %v, want op %q wrapping ErrClosed", op, se, op)
		}
	}
}

func TestProvider_BadDataPanicsTyped(t *testing.T) {
	ctx := t.Context()
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	unknown := must(proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/nowhere.Nothing", Value: []byte{8, 1}}))
	for name, data := range map[string][]byte{
		"garbage": {0xff, 0xff, 0xff},
		"unknown": unknown,
	} {
		if err := s.PersistEvent(ctx, name, 0, data); err != nil {
			t.Fatal(err)
		}
		if err := s.PersistSnapshot(ctx, name, 0, data); err != nil {
			t.Fatal(err)
		}
		if se := raised(t, func() { p.GetEvents(name, 0, 0, func(any) {}) }); se.Op != durability.OpDecode || se.Name != name || se.Retryable() {
			t.Errorf("GetEvents of %s raised %v", name, se)
		}
		if se := raised(t, func() { p.GetSnapshot(name) }); se.Op != durability.OpDecode || se.Name != name {
			t.Errorf("GetSnapshot of %s raised %v", name, se)
		}
	}
	if se := raised(t, func() { p.PersistEvent("n", -1, wrapperspb.String("x")) }); se.Op != durability.OpPersistEvent {
		t.Errorf("negative index raised %v", se)
	}
	if se := raised(t, func() { p.PersistEvent("n", 0, nil) }); se.Op != durability.OpEncode {
		t.Errorf("nil event raised %v", se)
	}
}

func TestStoreError(t *testing.T) {
	cause := errors.New("disk on fire")
	err := fmt.Errorf("persist chunk: %w", &durability.StoreError{Op: durability.OpPersistEvent, Name: "r1", Err: cause})
	if got, want := err.Error(), `persist chunk: durability: persist event "r1": disk on fire`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, cause) {
		t.Error("errors.Is does not reach the cause")
	}
	if durability.IsRetryable(err) {
		t.Error("a plain cause is reported retryable")
	}
	if got := (&durability.StoreError{Op: "open", Err: cause}).Error(); got != "durability: open: disk on fire" {
		t.Errorf("Error() without name = %q", got)
	}
	if !durability.IsRetryable(&durability.StoreError{Op: "x", Err: temporary{}}) {
		t.Error("a Temporary() cause is not reported retryable")
	}
}

// TestStoreError_ClipsLongNames: a name longer than 256 bytes is quoted
// in part, cut on a rune's
// boundary, with a marker that says it was cut and the name's length; a
// name up to the limit is quoted whole.
func TestStoreError_ClipsLongNames(t *testing.T) {
	const quoted = 256 // bytes of a name StoreError.Error quotes
	cause := errors.New("refused")
	whole := strings.Repeat("n", quoted)
	if got, want := (&durability.StoreError{Op: "get events", Name: whole, Err: cause}).Error(),
		fmt.Sprintf("durability: get events %q: refused", whole); got != want {
		t.Errorf("a name of MaxQuotedName bytes: %q, want it whole", got)
	}
	for _, name := range []string{
		strings.Repeat("x", 32<<10),
		strings.Repeat("x", quoted-1) + strings.Repeat("é", 100), // a rune across the cut
	} {
		got := (&durability.StoreError{Op: "get events", Name: name, Err: cause}).Error()
		marker := fmt.Sprintf("…(actor name of %d bytes, clipped)", len(name))
		if len(got) > quoted+100 || !strings.Contains(got, marker) || !strings.HasSuffix(got, ": refused") ||
			!strings.HasPrefix(got, `durability: get events "xxx`) || !utf8.ValidString(got) || strings.Contains(got, `\x`) {
			t.Errorf("a name of %d bytes: %d-byte message %.300q…, want it clipped to %d bytes with %q, valid UTF-8",
				len(name), len(got), got, quoted, marker)
		}
	}
}

// TestIsPermanent: the store's sentinels of failures that repeating
// cannot cure, and errors marked Permanent, are permanent, through any
// wrapping; other failures, temporary ones and nil are not.
func TestIsPermanent(t *testing.T) {
	refused := errors.New("permission denied for table events")
	marked := durability.Permanent(refused)
	if marked.Error() != refused.Error() || !errors.Is(marked, refused) {
		t.Errorf("Permanent(err) = %q, errors.Is %t; want err's message, and errors.Is to see err", marked, errors.Is(marked, refused))
	}
	if durability.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	wrap := func(err error) error {
		return fmt.Errorf("claim: %w", &durability.StoreError{Op: "claim", Name: "s", Err: err})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"closed", wrap(durability.ErrClosed), true},
		{"invalid name", wrap(durability.ErrInvalidName), true},
		{"index overflow", wrap(durability.ErrIndexOverflow), true},
		{"damaged", wrap(durability.Damaged("memstore", durability.RecordEvent, 3, "checksum mismatch")), true},
		{"marked", wrap(marked), true},
		{"unmarked", wrap(refused), false},
		{"temporary", wrap(temporary{}), false},
		{"deadline", wrap(context.DeadlineExceeded), false},
		{"nil", nil, false},
	} {
		if got := durability.IsPermanent(tc.err); got != tc.want {
			t.Errorf("%s: IsPermanent(%v) = %t, want %t", tc.name, tc.err, got, tc.want)
		}
	}
}

type temporary struct{}

func (temporary) Error() string   { return "busy" }
func (temporary) Temporary() bool { return true }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestProvider_PersistEventsIsOneBatch: the events of one batch are
// stored at consecutive indexes and read back as their concrete types; a
// batch with an event that cannot be encoded stores nothing.
func TestProvider_PersistEventsIsOneBatch(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	p.PersistEvent("b", 0, wrapperspb.String("first"))
	batch := []proto.Message{wrapperspb.String("x"), wrapperspb.Int64(7), &wrapperspb.StringValue{},
		wrapperspb.Bytes(make([]byte, 100<<10))} // larger than a pooled buffer
	p.PersistEvents("b", 1, batch)
	var got []proto.Message
	p.GetEvents("b", 0, 0, func(e any) { got = append(got, e.(proto.Message)) })
	want := append([]proto.Message{wrapperspb.String("first")}, batch...)
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("event %d = %v, want %v", i, got[i], want[i])
		}
	}
	se := raised(t, func() { p.PersistEvents("b", 5, []proto.Message{wrapperspb.String("y"), nil}) })
	if se.Op != durability.OpEncode || !strings.Contains(se.Error(), "event 6") {
		t.Errorf("nil event in a batch: %v", se)
	}
	n := 0
	p.GetEvents("b", 5, 0, func(any) { n++ })
	if n != 0 {
		t.Errorf("a batch that failed to encode stored %d events", n)
	}
}

// stringAppender is a StringValue that encodes itself; lie adds to the
// size it reports.
type stringAppender struct {
	*wrapperspb.StringValue
	lie int
}

func (a stringAppender) ProtoSize() int { return proto.Size(a.StringValue) + a.lie }

func (a stringAppender) AppendProto(b []byte) []byte {
	return must(proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, a.StringValue))
}

// TestProvider_Appender: an event that encodes itself is stored as the
// same Any as its message, one by one and in a batch, and reads back as
// that message; one whose size does not match its bytes is refused as an
// encoding failure, with nothing stored.
func TestProvider_Appender(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	msg := wrapperspb.String("hello")
	p.PersistEvent("a", 0, stringAppender{StringValue: msg})
	p.PersistEvents("a", 1, []proto.Message{stringAppender{StringValue: msg}, msg})
	n := 0
	p.GetEvents("a", 0, 0, func(e any) {
		n++
		if !proto.Equal(e.(proto.Message), msg) {
			t.Errorf("event %d = %v, want %v", n-1, e, msg)
		}
	})
	if n != 3 {
		t.Errorf("%d events read back, want 3", n)
	}
	if se := raised(t, func() { p.PersistEvent("a", 3, stringAppender{StringValue: msg, lie: 1}) }); se.Op != durability.OpEncode {
		t.Errorf("a lying appender raised %v", se)
	}
	n = 0
	p.GetEvents("a", 3, 0, func(any) { n++ })
	if n != 0 {
		t.Errorf("%d events stored after the refused one", n)
	}
}

// TestProvider_GetEventsRefusesAGap: recovery (protoactor's Mixin, the
// actors package's shell) numbers the events it replays by counting them
// from the index it asked for, and persists the next event at the count.
// An event missing from the store (deleted without a snapshot covering
// it, or the snapshot that covered it deleted) would shift every later
// event onto a lower index: the actor's state would miss the event, and
// its next write would overwrite a stored one. So GetEvents refuses a
// log that does not run without a gap from the index asked for, naming
// the actor and the missing index, and delivers no event past the gap.
func TestProvider_GetEventsRefusesAGap(t *testing.T) {
	for _, c := range []struct {
		name      string
		from      int
		missing   uint64 // the index reported
		delivered int    // events before the gap
		prepare   func(p *durability.Provider)
	}{
		{"events deleted without a snapshot", 0, 0, 0, func(p *durability.Provider) { p.DeleteEvents("a", 1) }},
		{"snapshot deleted after compaction", 0, 0, 0, func(p *durability.Provider) {
			p.PersistSnapshot("a", 3, wrapperspb.String("state before 3"))
			p.DeleteSnapshots("a", 3)
		}},
		{"event missing after the snapshot", 2, 2, 0, func(p *durability.Provider) {
			p.PersistSnapshot("a", 2, wrapperspb.String("state before 2"))
			p.DeleteEvents("a", 2)
		}},
		{"event missing in the middle", 0, 5, 5, func(p *durability.Provider) { p.PersistEvent("a", 6, wrapperspb.Int32(6)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.New(nil)
			defer s.Close()
			p := newProvider(t, s, nil)
			for i := range 5 {
				p.PersistEvent("a", i, wrapperspb.Int32(int32(i)))
			}
			c.prepare(p)
			delivered := 0
			se := raised(t, func() {
				p.GetEvents("a", c.from, 0, func(e any) {
					if delivered++; delivered > c.delivered {
						t.Errorf("event %v delivered past the gap", e)
					}
				})
			})
			if delivered != c.delivered {
				t.Errorf("%d events delivered before the gap, want %d", delivered, c.delivered)
			}
			if se.Op != durability.OpGetEvents || se.Name != "a" || !strings.Contains(se.Error(), fmt.Sprintf("event %d missing", c.missing)) {
				t.Errorf("raised %v, want %s of %q saying event %d is missing", se, durability.OpGetEvents, "a", c.missing)
			}
		})
	}
	// Without a gap, from the index asked for, every event is delivered.
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	for i := range 5 {
		p.PersistEvent("a", i, wrapperspb.Int32(int32(i)))
	}
	var got []int32
	p.GetEvents("a", 2, 0, func(e any) { got = append(got, e.(*wrapperspb.Int32Value).Value) })
	p.GetEvents("b", 0, 0, func(e any) { t.Errorf("event %v of an actor without events", e) })
	if !slices.Equal(got, []int32{2, 3, 4}) {
		t.Errorf("events from 2 = %v, want [2 3 4]", got)
	}
}

// events counts name's events in s.
func events(t *testing.T, s durability.Store, name string) int {
	t.Helper()
	n := 0
	if err := s.GetEvents(t.Context(), name, 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// plainErrors is a Store that breaks the contract: its writes and reads
// fail with plain errors, not *durability.StoreError.
type plainErrors struct{ discard }

var errPlain = errors.New("plain failure")

func (plainErrors) PersistEvent(context.Context, string, uint64, []byte) error { return errPlain }
func (plainErrors) GetSnapshot(context.Context, string) (durability.Snapshot, bool, error) {
	return durability.Snapshot{}, false, errPlain
}

// TestProvider_PlainStoreErrorsNameTheActor: a store's error that is not
// a *StoreError is raised inside one, with the operation and the actor
// it failed for, so that a supervisor (and its log) can tell which actor
// failed; and a batch at a negative index is refused as a batch.
func TestProvider_PlainStoreErrorsNameTheActor(t *testing.T) {
	p := newProvider(t, plainErrors{}, nil)
	for op, call := range map[string]func(){
		durability.OpPersistEvent: func() { p.PersistEvent("router-7", 3, wrapperspb.String("x")) },
		durability.OpGetSnapshot:  func() { p.GetSnapshot("router-7") },
	} {
		se := raised(t, call)
		if se.Op != op || se.Name != "router-7" || !errors.Is(se, errPlain) {
			t.Errorf("%s raised %#v, want Op %q, Name %q wrapping the store's error", op, se, op, "router-7")
		}
	}
	if se := raised(t, func() { p.PersistEvents("router-7", -1, []proto.Message{wrapperspb.String("x")}) }); se.Op != durability.OpPersistEvents || se.Name != "router-7" {
		t.Errorf("a batch at index -1 raised %v, want Op %q", se, durability.OpPersistEvents)
	}
}

// TestStoreError_QuotesNamesThatStartNoRune: a long name of bytes that
// start no rune (invalid UTF-8) is still quoted in part, its bytes
// escaped, not as an empty string.
func TestStoreError_QuotesNamesThatStartNoRune(t *testing.T) {
	name := strings.Repeat("\x80", 512)
	got := (&durability.StoreError{Op: "get events", Name: name, Err: errors.New("refused")}).Error()
	if !strings.HasPrefix(got, `durability: get events "\x80\x80`) || len(got) > 4*256+100 || !utf8.ValidString(got) {
		t.Errorf("a name of 512 bytes 0x80: %d-byte message %.200q…, want part of it quoted, escaped", len(got), got)
	}
}
