package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
	"google.golang.org/protobuf/proto"
)

// releasedSession runs session id on store as the released version's
// agent did: a tool loop whose session is stored under the bare id (and
// its held calls under id + tools.ApprovalStoreSuffix), its request sent
// on stream id#1, read until the stream ends or the round waits for
// approval. The loop is stopped afterwards. A snapshotEvery of 1 makes
// the session a snapshot and events after it (a long session's shape).
func releasedSession(t *testing.T, store durability.Store, id string, snapshotEvery int, m actors.Spec, approval *tools.ApprovalOptions, all ...*tools.Tool) {
	t.Helper()
	releasedLoop(t, m, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: agent.DefaultName, Tools: all},
		Session: &tools.SessionOptions{ID: id, Store: store, SnapshotEvery: snapshotEvery}, Approval: approval})
}

// releasedLoop plays ask on a loop of opts (its session stored as the
// released version kept it) until the stream ends or waits for approval.
func releasedLoop(t *testing.T, m actors.Spec, opts *tools.LoopOptions) {
	t.Helper()
	id := opts.Session.ID
	rt := actorstest.NewRuntime(t, nil)
	spec, err := tools.NewLoop(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux, err := rt.StartMux(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close(context.Background())
	stream := agent.StreamID(id, 1)
	s, err := mux.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.SendAll(messages.RawParam(stream, models.ParamMessages, models.EncodeMessages(ask)), messages.End(stream)); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := s.Recv(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if f.GetType() == messages.FrameType_END || f.GetName() == tools.MetaApprovalWaiting {
			return
		}
	}
}

// legacyStores are the stores the upgrade path is tested on.
var legacyStores = []struct {
	name string
	open func(t *testing.T) durability.Store
}{
	{"memstore", func(t *testing.T) durability.Store {
		s := memstore.New(nil)
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"boltstore", openBolt},
}

// TestLegacy_EndedSessionNotLostOnUpgrade: a session the released
// version ended is stored under its bare id. The upgraded agent's Run of
// it does not start the conversation afresh (which asked the model
// again and lost the stored one to the user): it fails with
// ErrLegacySession, naming MigrateSessions, and changes nothing; once
// migrated, the Run answers from the store.
func TestLegacy_EndedSessionNotLostOnUpgrade(t *testing.T) {
	for _, st := range legacyStores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			var echoes atomic.Int64
			releasedSession(t, store, "s1", 0, model(t,
				scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
				scripted.Turn{Text: "the released answer"},
			), nil, echo(&echoes))
			before, ok, err := tools.ReadSession(context.Background(), store, "s1")
			if err != nil || !ok || before.GetText() != "the released answer" {
				t.Fatalf("the released session: %v, %v, %v", before, ok, err)
			}
			rt := actorstest.NewRuntime(t, nil)
			fresh := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "a fresh answer"}}}, nil)
			a := newAgent(t, rt, fresh.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(&echoes)}, Store: store})

			ans, err := a.Run(testCtx(t), "s1", ask)
			if !errors.Is(err, agent.ErrLegacySession) || !strings.Contains(err.Error(), "MigrateSessions") {
				t.Fatalf("Run of a session of the released version: %v, %+v; want ErrLegacySession naming MigrateSessions", err, ans)
			}
			if n := len(fresh.Requests()); n != 0 {
				t.Fatalf("the model was asked %d time(s)", n)
			}
			if _, ok, err := tools.ReadSession(context.Background(), store, a.SessionKey("s1")); ok || err != nil {
				t.Fatalf("the refused Run stored a session under the new key: %v, %v", ok, err)
			}

			if err := a.MigrateSessions(testCtx(t), "s1"); err != nil {
				t.Fatal(err)
			}
			ans, err = a.Run(testCtx(t), "s1", ask)
			if err != nil || ans.Text != "the released answer" {
				t.Fatalf("Run after MigrateSessions: %v, %+v; want the stored answer", err, ans)
			}
			if n := len(fresh.Requests()); n != 0 || echoes.Load() != 1 {
				t.Fatalf("after the migration: %d model request(s), %d echo(es); want 0 and the released one", n, echoes.Load())
			}
			if _, ok, err := tools.ReadSession(context.Background(), store, "s1"); ok || err != nil {
				t.Fatalf("the bare id still holds a session after the move: %v, %v", ok, err)
			}
		})
	}
}

// TestLegacy_HeldCallsMoveWithTheSession: a session of the released
// version waiting for approval keeps its held call under its bare id +
// tools.ApprovalStoreSuffix. Resume refuses it until it is migrated;
// MigrateSessions moves the held call with it, and the approval then
// runs the call once and ends the conversation.
func TestLegacy_HeldCallsMoveWithTheSession(t *testing.T) {
	for _, st := range legacyStores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			released := newLauncher()
			releasedSession(t, store, "session-1", 0, approvalScript(t).Spec("model"), &tools.ApprovalOptions{}, echo(nil), released.tool())
			if held, err := tools.ReadApprovals(store, "session-1"); err != nil || len(held) != 1 || held[0].ToolCallID != "c2" {
				t.Fatalf("the released session's held calls: %+v, %v", held, err)
			}
			rt := actorstest.NewRuntime(t, nil)
			l := newLauncher()
			m := approvalScript(t)
			a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()}, Store: store,
				Approval: &tools.ApprovalOptions{}})
			if _, err := a.Resume(testCtx(t), "session-1", ask, agent.Approve("c2")); !errors.Is(err, agent.ErrLegacySession) {
				t.Fatalf("Resume before the migration: %v, want ErrLegacySession", err)
			}
			if l.runs.Load() != 0 || len(m.Requests()) != 0 {
				t.Fatalf("the refused Resume launched %d, asked the model %d time(s)", l.runs.Load(), len(m.Requests()))
			}
			if err := a.MigrateSessions(testCtx(t), "session-1"); err != nil {
				t.Fatal(err)
			}
			if held, err := tools.ReadApprovals(store, a.SessionKey("session-1")); err != nil || len(held) != 1 || held[0].ToolCallID != "c2" {
				t.Fatalf("held calls under the new key: %+v, %v", held, err)
			}
			if held, err := tools.ReadApprovals(store, "session-1"); err != nil || len(held) != 0 {
				t.Fatalf("held calls left under the bare id: %+v, %v", held, err)
			}
			ans, err := a.Resume(testCtx(t), "session-1", ask, agent.Approve("c2"))
			if err != nil || ans.Text != "Done." {
				t.Fatalf("Resume after the migration: %v, %+v", err, ans)
			}
			if l.runs.Load() != 1 || released.runs.Load() != 0 {
				t.Fatalf("launched %d time(s) (and %d by the released version), want once", l.runs.Load(), released.runs.Load())
			}
			if res := resultOf(t, ans, "c2"); res.IsError {
				t.Fatalf("approved call answered %+v", res)
			}
		})
	}
}

// TestLegacy_OtherConversationUnderTheKey: a Run of other messages under
// the id of a released session is not its continuation: it runs as a new
// conversation under the agent's key. The released session is left as it
// is, and MigrateSessions then refuses to replace the new one
// (tools.ErrSessionExists), changing neither.
func TestLegacy_OtherConversationUnderTheKey(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	releasedSession(t, store, "s1", 0, model(t, scripted.Turn{Text: "the released answer"}), nil)
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "a new conversation"}), &agent.Options{Store: store})
	other := []models.Message{models.UserMessage("Something else.")}
	if ans, err := a.Run(testCtx(t), "s1", other); err != nil || ans.Text != "a new conversation" {
		t.Fatalf("Run of other messages: %v, %+v", err, ans)
	}
	err := a.MigrateSessions(testCtx(t), "s1")
	if !errors.Is(err, tools.ErrSessionExists) {
		t.Fatalf("MigrateSessions over another conversation: %v, want ErrSessionExists", err)
	}
	if st, ok, err := tools.ReadSession(context.Background(), store, "s1"); err != nil || !ok || st.GetText() != "the released answer" {
		t.Fatalf("the released session after the refused move: %v, %v, %v", st, ok, err)
	}
	if ans, err := a.Run(testCtx(t), "s1", other); err != nil || ans.Text != "a new conversation" {
		t.Fatalf("the new conversation after the refused move: %v, %+v", err, ans)
	}
}

// crashingStore fails every write (persist or delete) after the first
// ok ones, as a process that dies there would leave the store: each
// write is atomic, so the writes before the crash are all that is
// stored.
type crashingStore struct {
	durability.Store
	ok atomic.Int64 // writes left before the crash; negative: never
}

func (s *crashingStore) write() error {
	if s.ok.Load() < 0 || s.ok.Add(-1) >= 0 {
		return nil
	}
	return errors.New("crashed")
}

func (s *crashingStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *crashingStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *crashingStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

func (s *crashingStore) DeleteEvents(ctx context.Context, name string, through uint64) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.DeleteEvents(ctx, name, through)
}

func (s *crashingStore) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.DeleteSnapshots(ctx, name, through)
}

// TestLegacy_MigrationCrashSafe: a migration that crashes after any of
// its writes leaves exactly one whole session that a Run reads (under the
// key once it is there, else under the bare id, refused with
// ErrLegacySession), with its held call; MigrateSessions called again
// completes the move, and the session resumes to its end. Once the key
// holds the session, what the crash left under the bare id is deleted by
// the next MigrateSessions also when a Run has taken the session on
// meanwhile (to its end, here): the key holds all it holds.
func TestLegacy_MigrationCrashSafe(t *testing.T) {
	for _, st := range legacyStores {
		t.Run(st.name, func(t *testing.T) {
			for _, resumeFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("resumeFirst=%v", resumeFirst), func(t *testing.T) {
					for crashAt := int64(0); migrationCrash(t, st.open, crashAt, resumeFirst); crashAt++ {
					}
				})
			}
		})
	}
}

// migrationCrash is a case of TestLegacy_MigrationCrashSafe: the
// migration crashes after crashAt writes. It reports whether it crashed
// (false: the migration's every write was made). With resumeFirst, a
// session the crash left under its key is resumed to its end before
// MigrateSessions is called again.
func migrationCrash(t *testing.T, open func(*testing.T) durability.Store, crashAt int64, resumeFirst bool) (crashed bool) {
	t.Helper()
	store := &crashingStore{Store: open(t)}
	store.ok.Store(-1)
	releasedSession(t, store, "session-1", 1, approvalScript(t).Spec("model"), &tools.ApprovalOptions{}, echo(nil), newLauncher().tool())
	want, _, err := tools.ReadSession(context.Background(), store, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	var after int // events after the snapshot
	store.GetEvents(context.Background(), "session-1", 0, 0, func(uint64, []byte) error { after++; return nil })
	if snap, ok, err := store.GetSnapshot(context.Background(), "session-1"); !ok || err != nil || snap.Index == 0 || after == 0 {
		t.Fatalf("the released session is not a snapshot and events after it: %v, %v, %v, %d event(s)", snap.Index, ok, err, after)
	}
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()}, Store: store,
		Approval: &tools.ApprovalOptions{}})
	key := a.SessionKey("session-1")

	store.ok.Store(crashAt)
	crashed = a.MigrateSessions(testCtx(t), "session-1") != nil
	store.ok.Store(-1)
	// Where a Run reads the session: under its key once it holds one.
	at := key
	if _, ok, err := tools.ReadSession(context.Background(), store, key); err != nil || !ok {
		at = "session-1"
		if _, err := a.Resume(testCtx(t), "session-1", ask); !errors.Is(err, agent.ErrLegacySession) {
			t.Fatalf("crash after %d write(s): Resume with the session under its bare id: %v", crashAt, err)
		}
	}
	got, ok, err := tools.ReadSession(context.Background(), store, at)
	if err != nil || !ok {
		t.Fatalf("crash after %d write(s): session under %q: %v, %v", crashAt, at, ok, err)
	}
	got.SessionId, want.SessionId = "", ""
	if !proto.Equal(got, want) {
		t.Fatalf("crash after %d write(s): session under %q\n%v\nwant\n%v", crashAt, at, got, want)
	}
	if held, err := tools.ReadApprovals(store, at); err != nil || len(held) != 1 || held[0].ToolCallID != "c2" {
		t.Fatalf("crash after %d write(s): held calls under %q: %+v, %v", crashAt, at, held, err)
	}

	resume := func() {
		t.Helper()
		ans, err := a.Resume(testCtx(t), "session-1", ask, agent.Approve("c2"))
		if err != nil || ans.Text != "Done." || l.runs.Load() != 1 {
			t.Fatalf("crash after %d write(s): Resume: %v, %+v, launched %d", crashAt, err, ans, l.runs.Load())
		}
	}
	resumed := resumeFirst && at == key
	if resumed {
		resume()
	}
	if err := a.MigrateSessions(testCtx(t), "session-1"); err != nil {
		t.Fatalf("crash after %d write(s): migrate again: %v", crashAt, err)
	}
	snap, ok, err := store.GetSnapshot(context.Background(), "session-1")
	var events int
	store.GetEvents(context.Background(), "session-1", 0, 0, func(uint64, []byte) error { events++; return nil })
	held, _, _ := store.GetSnapshot(context.Background(), "session-1"+tools.ApprovalStoreSuffix)
	if ok || err != nil || events != 0 || held.Data != nil {
		t.Fatalf("crash after %d write(s): left under the bare id: snapshot %v (%v), %d event(s), held %q", crashAt, snap, err, events, held.Data)
	}
	if !resumed {
		resume()
	}
	return crashed
}

// TestLegacy_SameOpeningIsNotTheSameSession: the key holds a
// conversation of this agent that began with the same request as the
// session stored under the bare id, but is another one (a released
// version still running stored one under the id afterwards). The
// session under the bare id is not taken for one moved already, and
// deleted: MigrateSessions fails with tools.ErrSessionExists and changes
// neither.
func TestLegacy_SameOpeningIsNotTheSameSession(t *testing.T) {
	waitingRelease := func(t *testing.T, store durability.Store) {
		releasedSession(t, store, "s1", 0, approvalScript(t).Spec("model"), &tools.ApprovalOptions{}, echo(nil), newLauncher().tool())
	}
	shout := tools.MustNewTyped(tools.Definition{Name: "echo", Description: "Echo the text, louder."}, func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (map[string]string, error) {
		return map[string]string{"echo": strings.ToUpper(in.Text)}, nil
	})
	for _, tc := range []struct {
		name     string
		current  []scripted.Turn // the agent's conversation under the key
		echo     *tools.Tool     // the agent's echo tool
		released func(t *testing.T, store durability.Store)
	}{
		{"both answered", []scripted.Turn{{Text: "a new answer"}}, echo(nil), func(t *testing.T, store durability.Store) {
			releasedSession(t, store, "s1", 0, model(t, scripted.Turn{Text: "the released answer"}), nil)
		}},
		{"fewer calls", []scripted.Turn{
			{Text: "Echo and launch.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
			{Text: "Done."},
		}, echo(nil), waitingRelease},
		{"other arguments", []scripted.Turn{
			{Text: "Echo and launch.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"bye"}`), call("c2", "launch", `{"target":"moon"}`)}},
			{Text: "Done."},
		}, echo(nil), waitingRelease},
		{"another result", []scripted.Turn{
			{Text: "Echo and launch.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`), call("c2", "launch", `{"target":"moon"}`)}},
			{Text: "Done."},
		}, shout, waitingRelease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New(nil)
			t.Cleanup(func() { store.Close() })
			rt := actorstest.NewRuntime(t, nil)
			a := newAgent(t, rt, model(t, tc.current...), &agent.Options{Store: store,
				Tools: []*tools.Tool{tc.echo, newLauncher().tool()}})
			if _, err := a.Run(testCtx(t), "s1", ask); err != nil {
				t.Fatal(err)
			}
			tc.released(t, store)
			current, _, err := tools.ReadSession(context.Background(), store, a.SessionKey("s1"))
			if err != nil {
				t.Fatal(err)
			}
			released, ok, err := tools.ReadSession(context.Background(), store, "s1")
			if err != nil || !ok || !bytes.Equal(released.GetFirstRequest(), current.GetFirstRequest()) {
				t.Fatalf("the released session: %v, %v, %v; want one of the same first request", released, ok, err)
			}

			err = a.MigrateSessions(testCtx(t), "s1")
			if !errors.Is(err, tools.ErrSessionExists) {
				t.Errorf("MigrateSessions: %v, want ErrSessionExists", err)
			}
			if st, ok, err := tools.ReadSession(context.Background(), store, "s1"); err != nil || !ok || !proto.Equal(st, released) {
				t.Errorf("the released session after the refused move: %v, %v, %v", st, ok, err)
			}
			if st, ok, err := tools.ReadSession(context.Background(), store, a.SessionKey("s1")); err != nil || !ok || !proto.Equal(st, current) {
				t.Errorf("the agent's session after the refused move: %v, %v, %v", st, ok, err)
			}
		})
	}
}

func TestReview11_KeyOfAnotherSessionTakenForALegacyOne(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "the answer"}}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "bot", Store: store})
	if ans, err := a.Run(testCtx(t), "x", ask); err != nil || ans.Text != "the answer" {
		t.Fatalf("Run of x: %v, %+v", err, ans)
	}
	other := a.SessionKey("x") // "bot/x": a valid session id too
	_, err := a.Run(testCtx(t), other, ask)
	if errors.Is(err, agent.ErrLegacySession) {
		t.Errorf("Run of session %q: %v; the store holds no released session, only this agent's session x", other, err)
	}
	if err := a.MigrateSessions(testCtx(t), other); err != nil {
		t.Logf("MigrateSessions(%q): %v", other, err)
	}
	n := len(m.Requests())
	_, err = a.Run(testCtx(t), "x", ask)
	if err != nil || len(m.Requests()) != n {
		t.Errorf("Run of x after MigrateSessions(%q): %v, the model asked %d more time(s); want the stored answer, no request", other, err, len(m.Requests())-n)
	}
	// Under agent.SessionKey("bot", other) is the Run of session other: a
	// conversation of its own. Session x stays under its key.
	if st, ok, err := tools.ReadSession(context.Background(), store, other); err != nil || !ok || st.GetText() != "the answer" {
		t.Errorf("session x under its key %q: %v, %v, %v; it was moved", other, st, ok, err)
	}
}

// TestLegacy_KeyOfAnotherAgentNotMigrated: an id that is the key of a
// session of another agent open on the same store is neither taken for
// a released session by a Run nor moved by MigrateSessions, which says
// whose key it is; also when the migrating agent has Telemetry, which
// measures its Store through a wrapper (names are claimed on the store
// as given, and looked up there).
func TestLegacy_KeyOfAnotherAgentNotMigrated(t *testing.T) {
	for _, name := range []string{"other", "team/other%1"} {
		t.Run(name, func(t *testing.T) { keyOfAnotherAgentNotMigrated(t, name, nil) })
	}
	t.Run("metered", func(t *testing.T) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		tel, err := telemetry.New(&telemetry.Options{MeterProvider: mp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		keyOfAnotherAgentNotMigrated(t, "other", tel)
	})
}

func keyOfAnotherAgentNotMigrated(t *testing.T, name string, tel *telemetry.Telemetry) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	owner := newAgent(t, rt, model(t, scripted.Turn{Text: "the owner's answer"}), &agent.Options{Name: name, Store: store})
	if _, err := owner.Run(testCtx(t), "s", ask); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "a fresh answer"}), &agent.Options{Name: "bot", Store: store, Telemetry: tel})
	id := owner.SessionKey("s")
	if _, err := a.Run(testCtx(t), id, ask); errors.Is(err, agent.ErrLegacySession) {
		t.Fatalf("Run of %q: %v; it is the key of agent %q's session s", id, err, name)
	}
	err := a.MigrateSessions(testCtx(t), id)
	if err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) {
		t.Fatalf("MigrateSessions(%q): %v; want a refusal naming agent %q", id, err, name)
	}
	if st, ok, err := tools.ReadSession(context.Background(), store, id); err != nil || !ok || st.GetText() != "the owner's answer" {
		t.Fatalf("agent %q's session after the refused move: %v, %v, %v", name, st, ok, err)
	}
}

func TestReview11_MoveOntoOwnApprovalRecordLosesTheSession(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	releasedSession(t, store, "approvals", 0, model(t, scripted.Turn{Text: "the released answer"}), nil)
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "a fresh answer"}), &agent.Options{Name: "approvals", Store: store})
	err := a.MigrateSessions(testCtx(t), "approvals")
	_, atKey, _ := tools.ReadSession(context.Background(), store, a.SessionKey("approvals"))
	_, atBare, _ := tools.ReadSession(context.Background(), store, "approvals")
	if !atKey && !atBare {
		t.Errorf("MigrateSessions: %v; the session is stored under neither %q nor the bare id", err, a.SessionKey("approvals"))
	}
	if ans, err := a.Run(testCtx(t), "approvals", ask); err == nil && ans.Text != "the released answer" {
		t.Errorf("Run after the migration answered %q, want the released answer", ans.Text)
	}
}

// TestLegacy_DamagedSessionUnderTheBareIdIsAnError: stored data under
// the bare id that cannot be read (a released session damaged) is not
// taken for "no session": a Run fails with the store's decode error,
// asking nothing and storing nothing, and MigrateSessions fails the same
// way and deletes nothing.
func TestLegacy_DamagedSessionUnderTheBareIdIsAnError(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	releasedSession(t, store, "s1", 0, model(t, scripted.Turn{Text: "the released answer"}), nil)
	if err := store.PersistSnapshot(context.Background(), "s1", 1000, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "a fresh answer"}}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Store: store})
	var se *durability.StoreError
	ans, err := a.Run(testCtx(t), "s1", ask)
	if !errors.As(err, &se) || se.Op != durability.OpDecode {
		t.Fatalf("Run of a damaged released session: %v, %+v; want the decode error", err, ans)
	}
	if n := len(m.Requests()); n != 0 {
		t.Fatalf("the model was asked %d time(s)", n)
	}
	if err := a.MigrateSessions(testCtx(t), "s1"); !errors.As(err, &se) || se.Op != durability.OpDecode {
		t.Fatalf("MigrateSessions of a damaged released session: %v; want the decode error", err)
	}
	if snap, ok, err := store.GetSnapshot(context.Background(), "s1"); err != nil || !ok || string(snap.Data) != "damaged" {
		t.Fatalf("the damaged session after the refused move: %q, %v, %v", snap.Data, ok, err)
	}
	if _, ok, err := tools.ReadSession(context.Background(), store, a.SessionKey("s1")); ok || err != nil {
		t.Fatalf("under the key: %v, %v; want nothing", ok, err)
	}
}

// readCounter counts the reads of one name.
type readCounter struct {
	durability.Store
	name  string
	reads atomic.Int64
}

func (s *readCounter) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	if name == s.name {
		s.reads.Add(1)
	}
	return s.Store.GetSnapshot(ctx, name)
}

func (s *readCounter) GetEvents(ctx context.Context, name string, from, max uint64, fn func(uint64, []byte) error) error {
	if name == s.name {
		s.reads.Add(1)
	}
	return s.Store.GetEvents(ctx, name, from, max, fn)
}

// TestLegacy_MigratedSessionDoesNotReadTheBareId: once a session is
// under its key, a Run reads nothing under the bare id, so what is left
// there (damaged, here) neither costs a read nor blocks it.
func TestLegacy_MigratedSessionDoesNotReadTheBareId(t *testing.T) {
	store := &readCounter{Store: memstore.New(nil), name: "s1"}
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "the answer"}), &agent.Options{Store: store})
	if _, err := a.Run(testCtx(t), "s1", ask); err != nil {
		t.Fatal(err)
	}
	if err := store.PersistSnapshot(context.Background(), "s1", 1, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	store.reads.Store(0)
	if ans, err := a.Run(testCtx(t), "s1", ask); err != nil || ans.Text != "the answer" {
		t.Fatalf("Run of a session under its key: %v, %+v", err, ans)
	}
	if n := store.reads.Load(); n != 0 {
		t.Fatalf("the Run read the bare id %d time(s)", n)
	}
}

// TestLegacy_HeldCallsLeftByACrashNotTakenByAnotherConversation: a
// migration that crashed once it had copied the held calls leaves them
// under the key with no session there. A Run of other messages starts a
// new conversation under the key: the held calls of the released one are
// not its own (its call c2, which the policy runs, is not held as the
// released one was).
func TestLegacy_HeldCallsLeftByACrashNotTakenByAnotherConversation(t *testing.T) {
	store := &crashingStore{Store: memstore.New(nil)}
	t.Cleanup(func() { store.Close() })
	store.ok.Store(-1)
	releasedSession(t, store, "session-1", 0, approvalScript(t).Spec("model"), &tools.ApprovalOptions{}, echo(nil), newLauncher().tool())
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	runAll := func(tools.ApprovalCall) (tools.Verdict, string) { return tools.VerdictRun, "" }
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()}, Store: store,
		Approval: &tools.ApprovalOptions{Policy: runAll}})
	store.ok.Store(1) // the held calls are copied, then the process dies
	if err := a.MigrateSessions(testCtx(t), "session-1"); err == nil {
		t.Fatal("MigrateSessions did not crash")
	}
	store.ok.Store(-1)
	if held, err := tools.ReadApprovals(store, a.SessionKey("session-1")); err != nil || len(held) != 1 {
		t.Fatalf("the crash left %+v, %v under the key; want the copied held call", held, err)
	}
	other := []models.Message{models.UserMessage("Launch something else.")}
	ans, err := a.Run(testCtx(t), "session-1", other)
	if err != nil || ans.Text != "Done." || l.runs.Load() != 1 {
		t.Fatalf("Run of a new conversation: %v, %+v, launched %d; want c2 run by the policy", err, ans, l.runs.Load())
	}
}
