package tools_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// The tests of this file cancel (or abort) a durable session at each
// point of a round, then resume it with a new loop on the same store, and
// check the same things: each call of the cancelled round gets exactly
// one result, the one its consumer saw (cancelled for the calls that had
// not completed, the stored result for those that had), no cancelled call
// runs again (not even the idempotent one), the follow-up request goes to
// the model, and the model's answer ends the session.

// cancelRoundOptions are a durable loop's options with three tools: wait
// (idempotent, so a resume would run it again), hold and quick.
func cancelRoundOptions(store durability.Store) *tools.LoopOptions {
	return &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{
			tools.MustNew(tools.Definition{Name: "wait", Idempotent: true}),
			tools.MustNew(tools.Definition{Name: "hold"}),
			tools.MustNew(tools.Definition{Name: "quick"}),
		}},
		Session: &tools.SessionOptions{ID: "session", Store: store},
	}
}

// stoppedResult is the answer a tool actor gives a call that the
// consumer's CANCEL (or ABORT) stopped.
func stoppedResult(stream, id, name string, abort bool) *messages.Frame {
	why := "Tool call cancelled"
	if abort {
		why = "Tool call aborted"
	}
	f := messages.ToolError(stream, id, name, why)
	f.Meta.FailureKind = string(tools.FailureCancelled)
	return f
}

// startRound starts the session on stream s: the model calls wait (c1),
// hold (c2) and quick (c3), and quick answers; wait and hold still run.
func startRound(s *loopStep) {
	s.t.Helper()
	s.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
	s.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)), messages.ToolCall("s", "c2", "hold", raw(`{}`)),
		messages.ToolCall("s", "c3", "quick", raw(`{}`)), messages.End("s"))
	if got := s.ran(); strings.Join(got, ",") != "c1,c2,c3" {
		s.t.Fatalf("calls started: %q, want c1, c2 and c3", got)
	}
	s.tool("quick", messages.RawToolResult("s", "c3", "quick", raw(`{"ok":true}`)), messages.End("s"))
}

// checkResumed resumes the session on a new loop (stream r) and checks
// that each call gets once the result in want (by call id), that none
// runs, that the follow-up goes to the model and that the model's answer
// ends the session.
func checkResumed(t *testing.T, opts *tools.LoopOptions, want map[string]*messages.Frame) {
	t.Helper()
	r := newLoopStep(t, opts)
	r.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), messages.End("r"))
	got := resultsByCall(r.r.Emitted)
	for id, w := range want {
		if len(got[id]) != 1 || !sameResult(got[id][0], w) {
			t.Errorf("call %s: the resumed session answered %q, want once %s", id, lines(got[id]), line(w))
		}
	}
	if len(got) != len(want) {
		t.Errorf("the resumed session answered %q, want the calls %d of the cancelled round", lines(r.r.Emitted), len(want))
	}
	if ran := r.ran(); len(ran) != 0 {
		t.Errorf("the resumed session ran %q again", ran)
	}
	sent := r.toModel()
	followUp := slices.ContainsFunc(sent, func(f *messages.Frame) bool {
		return f.IsParam(models.ParamMessages) && strings.Contains(string(f.GetPayload()), `"role":"tool"`)
	})
	if !followUp || len(sent) == 0 || sent[len(sent)-1].GetType() != messages.FrameType_END {
		t.Fatalf("the resumed session sent the model %q, want the follow-up request", lines(sent))
	}
	r.model(messages.Text("r", "done"), messages.End("r"))
	out := r.r.Emitted
	if n := len(out); n < 2 || !isText("done")(out[n-2]) || !isEnd(out[n-1]) {
		t.Errorf("resumed: the consumer got %q, want the model's answer and END", lines(out))
	}
	st, ok, err := tools.ReadSession(context.Background(), opts.Session.Store, opts.Session.ID)
	if err != nil || !ok || st.GetPhase() != messages.LoopPhase_LOOP_PHASE_DONE || st.GetText() != "done" {
		t.Errorf("stored session after the answer: %v (found %v, %v), want it ended with the answer", st, ok, err)
	}
}

// TestSession_CancelWhileToolsRunResumes: the consumer cancels (or aborts)
// a durable session while its calls run; the model's response has ended,
// so the CANCEL or ABORT is the tools' alone (the loop does not pass it
// to the model); they answer the running calls as cancelled and the
// stream ends. The session stays
// resumable: resumed, it gives each call the result the consumer saw and
// carries on to the model's answer.
func TestSession_CancelWhileToolsRunResumes(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				abort := tc.name == "abort"
				opts := cancelRoundOptions(store)
				first := newLoopStep(t, opts)
				startRound(first)
				first.outer(tc.stop("s"))
				first.tool("wait", stoppedResult("s", "c1", "wait", abort), messages.End("s"))
				first.tool("hold", stoppedResult("s", "c2", "hold", abort), messages.End("s"))
				if out := first.r.Emitted; len(out) == 0 || !isEnd(out[len(out)-1]) {
					t.Fatalf("the consumer got %q, want the stream ended", lines(out))
				}
				saw := map[string]*messages.Frame{}
				for id, got := range resultsByCall(first.r.Emitted) {
					if len(got) != 1 {
						t.Fatalf("call %s answered %q, want once", id, lines(got))
					}
					saw[id] = got[0]
				}
				if tools.KindOf(saw["c1"]) != tools.FailureCancelled || tools.KindOf(saw["c2"]) != tools.FailureCancelled || saw["c3"].IsErrorResult() {
					t.Fatalf("the consumer got %q, want c1 and c2 cancelled, c3's result", lines(first.r.Emitted))
				}
				checkResumed(t, opts, saw)
			})
		})
	}
}

// TestSession_CancelMidAnswerResumes: the consumer cancels (or aborts) a
// durable session while the model is answering, after it made a complete
// call (to wait) and while it streams another (to hold). The model ends
// its response with ERROR and END, as adapters answer a stop, or its END
// crosses the stop (it had answered already). Either way the consumer
// sees both calls cancelled, and the session stays resumable: resumed, it
// gives each call that result and carries on to the model's answer.
func TestSession_CancelMidAnswerResumes(t *testing.T) {
	for _, tc := range stopFrames {
		for _, answer := range []string{"error", "end"} {
			t.Run(tc.name+"/"+answer, func(t *testing.T) {
				forEachStore(t, func(t *testing.T, store durability.Store) {
					opts := cancelRoundOptions(store)
					first := newLoopStep(t, opts)
					first.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
					first.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)),
						messages.StreamingToolCall("s", "c2", "hold"), messages.ToolArgChunk("s", "c2", `{"a":`))
					first.outer(tc.stop("s"))
					if answer == "error" {
						first.model(messages.Error("s", models.ErrCancelled.Error()))
					}
					first.model(messages.End("s"))
					if ran := first.ran(); len(ran) != 0 {
						t.Fatalf("the cancelled response's calls ran: %q", ran)
					}
					saw := map[string]*messages.Frame{}
					for id, got := range resultsByCall(first.r.Emitted) {
						if len(got) != 1 || tools.KindOf(got[0]) != tools.FailureCancelled {
							t.Fatalf("call %s answered %q, want once, cancelled", id, lines(got))
						}
						saw[id] = got[0]
					}
					if len(saw) != 2 {
						t.Fatalf("the consumer got %q, want c1 and c2 answered", lines(first.r.Emitted))
					}
					checkResumed(t, opts, saw)
				})
			})
		}
	}
}

// failingStore fails every write once armed (after spare more), as a
// store that went away does.
type failingStore struct {
	durability.Store
	armed atomic.Bool
	spare atomic.Int64 // writes that still succeed once armed
}

var errStoreGone = errors.New("store gone")

func (s *failingStore) fails() bool { return s.armed.Load() && s.spare.Add(-1) < 0 }

func (s *failingStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	if s.fails() {
		return errStoreGone
	}
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *failingStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if s.fails() {
		return errStoreGone
	}
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *failingStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	if s.fails() {
		return errStoreGone
	}
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

// failsOnStore delivers msg to the loop with fs failing after spare more
// writes, wants the loop to fail with the store's error (what names msg in
// the failure), and has the loop's failure handler run, as its actor's
// supervisor does; fs works again after.
func (s *loopStep) failsOnStore(fs *failingStore, spare int64, what string, msg any) {
	s.t.Helper()
	fs.spare.Store(spare)
	fs.armed.Store(true)
	defer fs.armed.Store(false)
	err := s.r.Deliver(s.l, msg)
	if !errors.Is(err, errStoreGone) {
		s.t.Fatalf("%s: want the store's failure, got %v", what, err)
	}
	s.l.(actors.FailureHandler).OnFailure(&s.r, err)
}

// TestSession_CancelThenStopResumes: the consumer cancels (or aborts) a
// durable session while its calls run, and the loop stops before the
// tools answered the cancelled calls: the process is killed, or the loop
// actor fails (its store fails as the first cancelled answer comes in),
// and its failure handler answers the calls. The resumed session gives the
// cancelled calls the result the consumer saw (after a kill it saw none:
// cancelled, as the tools answer a stopped call), never runs them, not
// even the idempotent one, gives the call that completed its stored
// result, and carries on to the model's answer.
func TestSession_CancelThenStopResumes(t *testing.T) {
	for _, tc := range stopFrames {
		for _, stop := range []string{"killed", "killed, compacted", "failed"} {
			t.Run(tc.name+"/"+stop, func(t *testing.T) {
				forEachStore(t, func(t *testing.T, store durability.Store) {
					abort := tc.name == "abort"
					fs := &failingStore{Store: store}
					opts := cancelRoundOptions(fs)
					first := newLoopStep(t, opts)
					startRound(first)
					first.outer(tc.stop("s"))
					want := map[string]*messages.Frame{
						"c1": stoppedResult("s", "c1", "wait", abort),
						"c2": stoppedResult("s", "c2", "hold", abort),
						"c3": messages.RawToolResult("s", "c3", "quick", raw(`{"ok":true}`)),
					}
					if stop == "failed" {
						first.failsOnStore(fs, 0, "c1's stopped result", actors.ChildFrame{Child: first.tools["wait"], Frame: stoppedResult("s", "c1", "wait", abort)})
						saw := resultsByCall(first.r.Emitted)
						for id, w := range want {
							if len(saw[id]) != 1 || !sameResult(saw[id][0], w) {
								t.Fatalf("call %s: the failing loop answered %q, want once %s", id, lines(saw[id]), line(w))
							}
						}
					}
					if stop == "killed, compacted" {
						// The stored session as one snapshot: the cancel
						// goes through the snapshot too.
						opts = cancelRoundOptions(compacted(t, store, opts.Session.ID))
					}
					checkResumed(t, opts, want)
				})
			})
		}
	}
}

// compacted returns a new store holding session id of store as a
// snapshot alone (as a bare messages.LoopSession, which sessions read).
func compacted(t *testing.T, store durability.Store, id string) durability.Store {
	t.Helper()
	st, ok, err := tools.ReadSession(context.Background(), store, id)
	if err != nil || !ok {
		t.Fatalf("read session: %v (found %v)", err, ok)
	}
	if st.GetCancel() == nil {
		t.Fatalf("the stored session holds no cancel: %v", st)
	}
	data, err := proto.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	out := memstore.New(nil)
	t.Cleanup(func() { out.Close() })
	if err := out.PersistSnapshot(context.Background(), id, st.GetSteps(), data); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSession_CancelHeldCallThenStopResumes: the consumer cancels (or
// aborts) a durable session whose call waits for approval, and the loop
// fails once the cancel is stored: neither the call's cancelled result
// nor the approval record without the call is. The consumer got the
// result "cancelled while it waited for approval"; the resumed session
// gives the call that result again, does not hold it for approval again,
// and carries on to the model's answer.
func TestSession_CancelHeldCallThenStopResumes(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				fs, opts, first := heldCallSession(t, store)
				if ran := first.ran(); len(ran) != 0 {
					t.Fatalf("%q ran without approval", ran)
				}
				first.failsOnStore(fs, 1, "the "+tc.name, tc.stop("s")) // the cancel's write, and none after it
				want := messages.ToolError("s", "c1", "nuke", "Tool call cancelled while it waited for approval")
				want.Meta.FailureKind = string(tools.FailureCancelled)
				if saw := resultsByCall(first.r.Emitted)["c1"]; len(saw) != 1 || !sameResult(saw[0], want) {
					t.Fatalf("the failing loop answered %q, want once %s", lines(saw), line(want))
				}
				checkResumed(t, opts, map[string]*messages.Frame{"c1": want})
			})
		})
	}
}

// TestSession_StopBeforeResumeEnd: the session stops (the process dies)
// while its calls run, and the consumer resuming it cancels (or aborts)
// the stream before its request's END. The cancel is stored before the
// resume acts on it: the stored calls without a result are answered as
// cancelled and none runs (not even the idempotent one), nothing goes to
// the model, the stream ends, and a later resume gives those results and
// carries on.
func TestSession_StopBeforeResumeEnd(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				opts := cancelRoundOptions(store)
				startRound(newLoopStep(t, opts)) // then killed
				r := newLoopStep(t, opts)
				r.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), tc.stop("r"), messages.End("r"))
				if ran := r.ran(); len(ran) != 0 {
					t.Errorf("the resume ran %q after the consumer's %s", ran, tc.name)
				}
				if sent := r.toModel(); len(sent) != 0 {
					t.Errorf("the resume sent the model %q", lines(sent))
				}
				out := r.r.Emitted
				if n := len(out); n == 0 || !isEnd(out[n-1]) {
					t.Fatalf("the consumer got %q, want the stream ended", lines(out))
				}
				saw := map[string]*messages.Frame{}
				for id, got := range resultsByCall(out) {
					if len(got) != 1 {
						t.Fatalf("call %s answered %q, want once", id, lines(got))
					}
					saw[id] = got[0]
				}
				abort := tc.name == "abort"
				for _, id := range []string{"c1", "c2"} {
					if want := stoppedResult("r", id, saw[id].GetName(), abort); !sameResult(saw[id], want) {
						t.Errorf("call %s: the consumer got %s, want %s", id, line(saw[id]), line(want))
					}
				}
				if saw["c3"].IsErrorResult() {
					t.Errorf("c3: the consumer got %s, want its stored result", line(saw["c3"]))
				}
				checkResumed(t, opts, saw)
			})
		})
	}
}

// TestSession_StopBeforeResumeEndAwaitingModel: as TestSession_StopBeforeResumeEnd
// for a session that stopped while it waited for the model's first
// response: the stopped resume sends the model nothing and ends the
// stream, and a later resume sends the request.
func TestSession_StopBeforeResumeEndAwaitingModel(t *testing.T) {
	forEachStore(t, func(t *testing.T, store durability.Store) {
		opts := cancelRoundOptions(store)
		newLoopStep(t, opts).outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s")) // then killed
		r := newLoopStep(t, opts)
		r.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), messages.Cancel("r", ""), messages.End("r"))
		if sent := r.toModel(); len(sent) != 0 {
			t.Errorf("the stopped resume sent the model %q", lines(sent))
		}
		if out := r.r.Emitted; len(out) == 0 || !isEnd(out[len(out)-1]) {
			t.Fatalf("the consumer got %q, want the stream ended", lines(out))
		}
		again := newLoopStep(t, opts)
		again.outer(messages.RawParam("q", models.ParamMessages, raw(cancelFirst)), messages.End("q"))
		if sent := again.toModel(); len(sent) == 0 || sent[len(sent)-1].GetType() != messages.FrameType_END {
			t.Errorf("the later resume sent the model %q, want the request", lines(sent))
		}
	})
}

// countingStore counts the writes of a store.
type countingStore struct {
	durability.Store
	writes atomic.Int64
}

func (s *countingStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	s.writes.Add(1)
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *countingStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	s.writes.Add(1)
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *countingStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	s.writes.Add(1)
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

// TestSession_CancelChangingNothingIsNotWritten: a CANCEL or ABORT that
// changes nothing a session keeps (the same CANCEL again, an ABORT after
// an ABORT, a CANCEL of the stream after an ABORT, a CANCEL naming a call
// the ended response did not make) costs no store write; the first one
// is written.
func TestSession_CancelChangingNothingIsNotWritten(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then *messages.Frame
	}{
		{"cancel twice", messages.Cancel("s", ""), messages.Cancel("s", "")},
		{"cancel of a call twice", messages.Cancel("s", "c1"), messages.Cancel("s", "c1")},
		{"abort twice", messages.Abort("s"), messages.Abort("s")},
		{"cancel after abort", messages.Abort("s"), messages.Cancel("s", "")},
		{"cancel of no call", messages.Cancel("s", "c1"), messages.Cancel("s", "nope")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				cs := &countingStore{Store: store}
				s := newLoopStep(t, cancelRoundOptions(cs))
				startRound(s)
				before := cs.writes.Load()
				s.outer(tc.first)
				if got := cs.writes.Load() - before; got != 1 {
					t.Fatalf("the first cancel cost %d writes, want 1", got)
				}
				s.outer(tc.then)
				if got := cs.writes.Load() - before; got != 1 {
					t.Errorf("the second cancel cost %d more writes, want none", got-1)
				}
			})
		})
	}
}

// TestSession_CancelWriteFailsLosesCancel pins what SessionOptions says of
// a store failing on the write of the caller's cancel itself: the cancel
// is lost, the running calls get stopped results, and a resume treats
// them as after any stop: it runs the Idempotent one again and answers
// the other as interrupted.
func TestSession_CancelWriteFailsLosesCancel(t *testing.T) {
	forEachStore(t, func(t *testing.T, store durability.Store) {
		fs := &failingStore{Store: store}
		opts := cancelRoundOptions(fs)
		first := newLoopStep(t, opts)
		startRound(first)
		first.failsOnStore(fs, 0, "the cancel", messages.Cancel("s", ""))
		saw := resultsByCall(first.r.Emitted)
		for _, id := range []string{"c1", "c2"} {
			if len(saw[id]) != 1 || tools.KindOf(saw[id][0]) != tools.FailureStopped {
				t.Errorf("call %s: the caller got %q, want one stopped result", id, lines(saw[id]))
			}
		}
		r := newLoopStep(t, opts)
		r.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), messages.End("r"))
		if ran := r.ran(); strings.Join(ran, ",") != "c1" {
			t.Errorf("the resume ran %q, want c1 (idempotent) again", ran)
		}
		r.tool("wait", messages.RawToolResult("r", "c1", "wait", raw(`{"ok":true}`)), messages.End("r"))
		if got := resultsByCall(r.r.Emitted)["c2"]; len(got) != 1 || tools.KindOf(got[0]) != tools.FailureInterrupted {
			t.Errorf("c2: the resume answered %q, want it interrupted", lines(got))
		}
	})
}

// TestSession_CancelInLastRoundEndsSession: the consumer cancels while
// the model answers in the round past MaxIterations, with a call. The
// round is the last either way, so the session ends as any last round
// does, whether the model ends its response with END or answers the
// cancel with ERROR: stored as done, and a resume gives END without
// asking the model or answering the call again.
func TestSession_CancelInLastRoundEndsSession(t *testing.T) {
	for _, answer := range []string{"error", "end"} {
		t.Run(answer, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				opts := cancelRoundOptions(store)
				opts.MaxIterations = 1
				first := newLoopStep(t, opts)
				first.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
				first.model(messages.ToolCall("s", "c1", "quick", raw(`{}`)), messages.End("s"))
				first.tool("quick", messages.RawToolResult("s", "c1", "quick", raw(`{"ok":true}`)), messages.End("s"))
				first.model(messages.Text("s", "partial"), messages.ToolCall("s", "c2", "quick", raw(`{}`)))
				first.outer(messages.Cancel("s", ""))
				if answer == "error" {
					first.model(messages.Error("s", models.ErrCancelled.Error()))
				}
				first.model(messages.End("s"))
				if got := resultsByCall(first.r.Emitted)["c2"]; len(got) != 1 || tools.KindOf(got[0]) != tools.FailureCancelled {
					t.Fatalf("c2: the consumer got %q, want it cancelled", lines(got))
				}
				st, ok, err := tools.ReadSession(t.Context(), store, "session")
				if err != nil || !ok || st.GetPhase() != messages.LoopPhase_LOOP_PHASE_DONE {
					t.Errorf("stored session: %v (found %v, %v), want it done", st, ok, err)
				}
				r := newLoopStep(t, opts)
				r.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), messages.End("r"))
				if out := r.r.Emitted; len(out) != 1 || !isEnd(out[0]) {
					t.Errorf("the resume gave %q, want END alone", lines(out))
				}
				if sent := r.toModel(); len(sent) != 0 {
					t.Errorf("the resume sent the model %q", lines(sent))
				}
			})
		})
	}
}

// heldCallSession starts a durable session, on store behind a
// failingStore (not armed), whose model calls "nuke", an irreversible
// tool the approval gate holds: the call waits for approval when it
// returns.
func heldCallSession(t *testing.T, store durability.Store) (*failingStore, *tools.LoopOptions, *loopStep) {
	t.Helper()
	fs := &failingStore{Store: store}
	opts := &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{
			tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true, Capabilities: []string{"execute"}}),
		}},
		Session:  &tools.SessionOptions{ID: "session", Store: fs},
		Approval: &tools.ApprovalOptions{},
	}
	first := newLoopStep(t, opts)
	first.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
	first.model(messages.ToolCall("s", "c1", "nuke", raw(`{}`)), messages.End("s"))
	return fs, opts, first
}
