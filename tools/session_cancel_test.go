package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// loopStep drives a tool loop's logic with a Recorder, as its actor would:
// the test plays the model (the inner duplex) and the tool actors, and so
// decides in which order their answers reach the loop.
type loopStep struct {
	t     *testing.T
	r     actorstest.Recorder
	l     actors.Logic
	inner actors.Ref
	tools map[string]actors.Ref // the tool actors, by tool name
}

func newLoopStep(t *testing.T, opts *tools.LoopOptions) *loopStep {
	t.Helper()
	spec, err := tools.NewLoop(tooltest.ScriptedModel("model", nil, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &loopStep{t: t, l: spec.New(), inner: actorstest.ChildRef(1), tools: map[string]actors.Ref{}}
	s.deliver(actors.Started{})
	for i, child := range s.r.Spawned[1:] { // the model first, then the tools
		s.tools[strings.TrimPrefix(child.Name, "tool-")] = actorstest.ChildRef(i + 2)
	}
	return s
}

func (s *loopStep) deliver(msg any) {
	s.t.Helper()
	if err := s.r.Deliver(s.l, msg); err != nil {
		s.t.Fatal(err)
	}
}

// outer sends frames into the loop, as its consumer does.
func (s *loopStep) outer(frames ...*messages.Frame) {
	s.t.Helper()
	for _, f := range frames {
		s.deliver(f)
	}
}

// model answers the loop as the model adapter does.
func (s *loopStep) model(frames ...*messages.Frame) {
	s.t.Helper()
	for _, f := range frames {
		s.deliver(actors.ChildFrame{Child: s.inner, Frame: f})
	}
}

// tool answers the loop as the actor of tool name does.
func (s *loopStep) tool(name string, frames ...*messages.Frame) {
	s.t.Helper()
	for _, f := range frames {
		s.deliver(actors.ChildFrame{Child: s.tools[name], Frame: f})
	}
}

// ran returns the ids of the calls the loop handed to tool actors.
func (s *loopStep) ran() []string {
	var ids []string
	for _, sent := range s.r.Sent {
		if !sent.To.Equal(s.inner) && sent.Frame.GetType() == messages.FrameType_TOOL_CALL {
			ids = append(ids, sent.Frame.GetToolCallId())
		}
	}
	return ids
}

// toModel returns the frames the loop wrote into the model.
func (s *loopStep) toModel() []*messages.Frame {
	var out []*messages.Frame
	for _, sent := range s.r.Sent {
		if sent.To.Equal(s.inner) {
			out = append(out, sent.Frame)
		}
	}
	return out
}

// resultsByCall returns the TOOL_RESULTs among frames by call id, every
// one of each.
func resultsByCall(frames []*messages.Frame) map[string][]*messages.Frame {
	out := map[string][]*messages.Frame{}
	for _, f := range toolResults(frames) {
		out[f.GetToolCallId()] = append(out[f.GetToolCallId()], f)
	}
	return out
}

// sameResult reports whether a and b are the same result on any stream.
func sameResult(a, b *messages.Frame) bool {
	a, b = messages.CloneFrame(a), messages.CloneFrame(b)
	a.StreamId, b.StreamId = "", ""
	return proto.Equal(a, b)
}

// stopFrames are the frames by which a consumer stops a stream's
// response and its running calls.
var stopFrames = []struct {
	name string
	stop func(stream string) *messages.Frame
}{
	{"cancel", func(stream string) *messages.Frame { return messages.Cancel(stream, "") }},
	{"abort", messages.Abort},
}

const cancelFirst = `[{"role":"user","content":"wait for it"}]`

// cancelledResult is the answer a tool actor gives a call a CANCEL or
// ABORT stopped.
func cancelledResult(stream, id, name string) *messages.Frame {
	f := messages.ToolError(stream, id, name, "Tool call cancelled")
	f.Meta.FailureKind = string(tools.FailureCancelled)
	return f
}

// TestSession_StopAnsweredWithErrorWhileToolsRun: the consumer cancels (or
// aborts) while the calls of a durable session run, and the model sends
// ERROR and END before the tools answer. The loop passes the model no
// CANCEL or ABORT then (its response ended), so only an adapter breaking
// the models contract does that: the test keeps the loop's guard against
// it. The calls are answered once, as
// cancelled, and that is what the session keeps: resumed, it gives each
// call the result its consumer saw, runs none of them again (not even the
// idempotent one) and goes on to the model's answer. The tools' own late
// answers change nothing.
func TestSession_StopAnsweredWithErrorWhileToolsRun(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				opts := &tools.LoopOptions{
					RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{
						tools.MustNew(tools.Definition{Name: "wait", Idempotent: true}),
						tools.MustNew(tools.Definition{Name: "hold"}),
					}},
					Session: &tools.SessionOptions{ID: "session", Store: store},
				}
				first := newLoopStep(t, opts)
				first.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
				first.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)), messages.ToolCall("s", "c2", "hold", raw(`{}`)), messages.End("s"))
				if got := first.ran(); strings.Join(got, ",") != "c1,c2" {
					t.Fatalf("calls started: %q, want c1 and c2", got)
				}
				first.outer(tc.stop("s"))
				first.model(messages.Error("s", models.ErrCancelled.Error()), messages.End("s"))
				first.tool("wait", cancelledResult("s", "c1", "wait"), messages.End("s"))
				first.tool("hold", cancelledResult("s", "c2", "hold"), messages.End("s"))
				saw := resultsByCall(first.r.Emitted)
				for _, id := range []string{"c1", "c2"} {
					if len(saw[id]) != 1 || tools.KindOf(saw[id][0]) != tools.FailureCancelled {
						t.Fatalf("call %s: the consumer got %q, want one cancelled result", id, lines(first.r.Emitted))
					}
				}

				resumed := newLoopStep(t, opts)
				resumed.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), messages.End("r"))
				again := resultsByCall(resumed.r.Emitted)
				for _, id := range []string{"c1", "c2"} {
					if len(again[id]) != 1 || !sameResult(again[id][0], saw[id][0]) {
						t.Errorf("call %s: the resumed session answered %q, want once what the consumer saw: %s",
							id, lines(resumed.r.Emitted), line(saw[id][0]))
					}
				}
				if ran := resumed.ran(); len(ran) != 0 {
					t.Errorf("the resumed session ran %q again", ran)
				}
				if sent := resumed.toModel(); len(sent) == 0 || sent[len(sent)-1].GetType() != messages.FrameType_END {
					t.Errorf("the resumed session sent the model %q, want the follow-up request", lines(sent))
				}
			})
		})
	}
}

// midAnswerModel answers a request with two complete calls, to wait
// and hold, and the TEXT "marker", its response still open; it ends an
// open response it is asked to stop (a CANCEL of the stream or an ABORT)
// with ERROR "cancelled" and END, as model adapters do, and answers a
// request that carries tool results with the TEXT "done" and END.
func midAnswerModel() actors.Spec {
	return actors.Spec{Name: "model", New: func() actors.Logic {
		open := map[string]bool{}
		var followUp bool // the request being sent carries tool results
		return actors.LogicFunc(func(c actors.Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			stream := f.GetStreamId()
			switch f.GetType() {
			case messages.FrameType_PARAM:
				if f.IsParam(models.ParamMessages) {
					followUp = strings.Contains(string(f.GetPayload()), `"role":"tool"`)
				}
			case messages.FrameType_END:
				if followUp {
					c.Emit(messages.Text(stream, "done"))
					c.Emit(messages.End(stream))
					return
				}
				open[stream] = true
				c.Emit(messages.ToolCall(stream, "c1", "wait", raw(`{}`)))
				c.Emit(messages.ToolCall(stream, "c2", "hold", raw(`{}`)))
				c.Emit(messages.Text(stream, "marker"))
			case messages.FrameType_CANCEL, messages.FrameType_ABORT:
				if f.GetToolCallId() != "" || !open[stream] {
					return
				}
				delete(open, stream)
				c.Emit(messages.Error(stream, models.ErrCancelled.Error()))
				c.Emit(messages.End(stream))
			}
		})
	}}
}

// TestSession_StopAnsweredWithErrorMidAnswer: the consumer cancels (or
// aborts) a durable session while the model is answering, after it made
// two complete calls, and the model ends its answer with ERROR and END as
// adapters do. The calls are answered once, as cancelled, and that is what
// the session keeps: a loop resuming it later gives each call the result
// its consumer saw, runs neither (not even the idempotent one) and goes on
// to the model's answer.
func TestSession_StopAnsweredWithErrorMidAnswer(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				var runs atomic.Int64
				counted := func(name string, idempotent bool) *tools.Tool {
					return tools.MustNew(tools.Definition{Name: name, Idempotent: idempotent,
						Handler: func(context.Context, json.RawMessage) (any, error) {
							runs.Add(1)
							return map[string]bool{"ok": true}, nil
						}})
				}
				all := []*tools.Tool{counted("wait", true), counted("hold", false)}
				rt := newRuntime(t)
				run := func(name, stream string, stop bool) []*messages.Frame {
					t.Helper()
					loop, err := tools.NewLoop(midAnswerModel(), &tools.LoopOptions{
						RouterOptions: tools.RouterOptions{Name: name, Tools: all},
						Session:       &tools.SessionOptions{ID: "session", Store: store},
					})
					if err != nil {
						t.Fatal(err)
					}
					conn := start(t, rt, loop)
					send(t, conn, messages.RawParam(stream, models.ParamMessages, raw(cancelFirst)), messages.End(stream))
					var out []*messages.Frame
					if stop {
						out = streamUntil(t, conn, stream, isText("marker"))
						send(t, conn, tc.stop(stream))
					}
					return append(out, streamUntil(t, conn, stream, isEnd)...)
				}
				out := run("loop-1", "s", true)
				saw := resultsByCall(out)
				for _, id := range []string{"c1", "c2"} {
					if len(saw[id]) != 1 || tools.KindOf(saw[id][0]) != tools.FailureCancelled {
						t.Fatalf("call %s: the consumer got %q, want one cancelled result", id, lines(out))
					}
				}
				again := run("loop-2", "r", false)
				for id, got := range resultsByCall(again) {
					if len(got) != 1 || len(saw[id]) != 1 || !sameResult(got[0], saw[id][0]) {
						t.Errorf("call %s: the resumed session answered %q, want once what the consumer saw", id, lines(again))
					}
				}
				if len(resultsByCall(again)) != 2 || !slices.ContainsFunc(again, isText("done")) {
					t.Errorf("resumed: got %q, want both calls answered and the model's answer", lines(again))
				}
				if n := runs.Load(); n != 0 {
					t.Errorf("the tools ran %d times, want never", n)
				}
			})
		})
	}
}

// TestLoop_StopAnsweredWithErrorAnswersOnce: without a session, a CANCEL
// or ABORT while the calls run, after which the model sends ERROR and END
// anyway (the loop passes it neither, so only an adapter breaking the
// models contract does: the loop's guard against it), gets each call
// exactly one result to the consumer, and the stream
// ends once, whether the model's answer or the tools' reaches the loop
// first; what comes later for the stream is dropped.
func TestLoop_StopAnsweredWithErrorAnswersOnce(t *testing.T) {
	for _, tc := range stopFrames {
		for _, order := range []string{"model first", "tools first"} {
			t.Run(tc.name+"/"+order, func(t *testing.T) {
				s := newLoopStep(t, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{
					tools.MustNew(tools.Definition{Name: "wait", Idempotent: true}),
					tools.MustNew(tools.Definition{Name: "hold"}),
				}}})
				s.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
				s.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)), messages.ToolCall("s", "c2", "hold", raw(`{}`)), messages.End("s"))
				s.outer(tc.stop("s"))
				model := func() { s.model(messages.Error("s", models.ErrCancelled.Error()), messages.End("s")) }
				toolsAnswer := func() {
					s.tool("wait", cancelledResult("s", "c1", "wait"), messages.End("s"))
					s.tool("hold", cancelledResult("s", "c2", "hold"), messages.End("s"))
				}
				if order == "model first" {
					model()
					toolsAnswer()
				} else {
					toolsAnswer()
					model()
				}
				got := resultsByCall(s.r.Emitted)
				for _, id := range []string{"c1", "c2"} {
					if len(got[id]) != 1 {
						t.Errorf("call %s answered %d times: %q", id, len(got[id]), lines(s.r.Emitted))
					}
				}
				ends := 0
				for _, f := range s.r.Emitted {
					if isEnd(f) {
						ends++
					}
				}
				if n := len(s.r.Emitted); ends != 1 || !isEnd(s.r.Emitted[n-1]) {
					t.Errorf("the stream ended %d times: %q, want once, at the end", ends, lines(s.r.Emitted))
				}
				if ran := s.ran(); len(ran) != 2 {
					t.Errorf("calls run: %q, want each once", ran)
				}
			})
		}
	}
}

// TestLoop_HookHearsResultsOfAnEndedStream: OnToolResult hears, once per
// call, the result the consumer got when the model ended the stream with
// ERROR: cancelled calls after a CANCEL or ABORT, stopped ones after a
// failure of the model.
func TestLoop_HookHearsResultsOfAnEndedStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop *messages.Frame // nil: the model fails by itself
	}{
		{"cancel", messages.Cancel("s", "")},
		{"abort", messages.Abort("s")},
		{"model failure", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var heard []tools.ToolResultEvent
			s := newLoopStep(t, &tools.LoopOptions{
				RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "wait"})}},
				OnToolResult:  func(e tools.ToolResultEvent) { heard = append(heard, e) },
			})
			s.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
			s.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)), messages.ToolCall("s", "c2", "wait", raw(`{}`)))
			reason := "the model went away"
			if tc.stop != nil {
				s.outer(tc.stop)
				reason = models.ErrCancelled.Error()
			}
			s.model(messages.Error("s", reason), messages.End("s"))
			got := toolResults(s.r.Emitted)
			if len(got) != 2 || len(heard) != 2 {
				t.Fatalf("the consumer got %q, the hook heard %d results; want both calls' results, each heard once", lines(s.r.Emitted), len(heard))
			}
			for i, e := range heard {
				if e.Result != got[i] || e.Call.GetToolCallId() != got[i].GetToolCallId() || e.StreamID != "s" || e.Iteration != 1 {
					t.Errorf("the hook heard %s (call %s, stream %q, round %d), want %s in round 1",
						line(e.Result), e.Call.GetToolCallId(), e.StreamID, e.Iteration, line(got[i]))
				}
			}
		})
	}
}

// TestSession_CancelMidAnswerStoreFailsResumesSameText: the caller stops
// the stream (CANCEL or ABORT) while the model answers, and the store
// fails on the write that ends the response (the model's ERROR or END).
// The failing loop and the resumed session give the cancelled call one
// text: "Tool call aborted" after an ABORT, "Tool call cancelled" after a
// CANCEL, whichever path answered it.
func TestSession_CancelMidAnswerStoreFailsResumesSameText(t *testing.T) {
	for _, tc := range stopFrames {
		for _, answer := range []string{"error", "end"} {
			t.Run(tc.name+"/"+answer, func(t *testing.T) {
				forEachStore(t, func(t *testing.T, store durability.Store) {
					fs := &failingStore{Store: store}
					opts := cancelRoundOptions(fs)
					first := newLoopStep(t, opts)
					first.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
					first.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)))
					first.outer(tc.stop("s"))
					f := messages.End("s")
					if answer == "error" {
						f = messages.Error("s", models.ErrCancelled.Error())
					}
					first.failsOnStore(fs, 0, "the response's end", actors.ChildFrame{Child: first.inner, Frame: f})
					saw := resultsByCall(first.r.Emitted)["c1"]
					if len(saw) != 1 {
						t.Fatalf("the failing loop answered c1 %q, want once", lines(saw))
					}
					want := "Tool call cancelled"
					if tc.name == "abort" {
						want = "Tool call aborted"
					}
					if !strings.Contains(line(saw[0]), want) {
						t.Errorf("the caller saw %s, want %q", line(saw[0]), want)
					}
					r := newLoopStep(t, opts)
					r.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)), messages.End("r"))
					got := resultsByCall(r.r.Emitted)["c1"]
					if len(got) != 1 || !sameResult(got[0], saw[0]) {
						t.Errorf("c1: the caller saw %s, the resume gave %q", line(saw[0]), lines(got))
					}
				})
			})
		}
	}
}

// TestSession_HeldCancelResumeStoreFailsBetweenWrites: as
// TestSession_CancelHeldCallThenStopResumes, then the first resume's store
// takes one write (of its result and of the approval record's) and fails
// on the other. The resume writes the call's result first, so a second
// resume still gives the text the callers saw, "cancelled while it waited
// for approval", not another one.
func TestSession_HeldCancelResumeStoreFailsBetweenWrites(t *testing.T) {
	forEachStore(t, func(t *testing.T, store durability.Store) {
		fs, opts, first := heldCallSession(t, store)
		first.failsOnStore(fs, 1, "the cancel", messages.Cancel("s", "")) // the cancel is stored, then the session stops
		want := "cancelled while it waited for approval"
		if saw := resultsByCall(first.r.Emitted)["c1"]; len(saw) != 1 || !strings.Contains(line(saw[0]), want) {
			t.Fatalf("caller 1 saw %q, want %q", lines(saw), want)
		}

		second := newLoopStep(t, opts)
		second.outer(messages.RawParam("r", models.ParamMessages, raw(cancelFirst)))
		second.failsOnStore(fs, 1, "the first resume", messages.End("r")) // one of the resume's two writes
		if saw := resultsByCall(second.r.Emitted)["c1"]; len(saw) != 1 || !strings.Contains(line(saw[0]), want) {
			t.Fatalf("caller 2 saw %q, want %q", lines(saw), want)
		}

		third := newLoopStep(t, opts)
		third.outer(messages.RawParam("q", models.ParamMessages, raw(cancelFirst)), messages.End("q"))
		if got := resultsByCall(third.r.Emitted)["c1"]; len(got) != 1 || !strings.Contains(line(got[0]), want) {
			t.Errorf("the second resume answered c1 %q, the callers saw %q", lines(got), want)
		}
	})
}

// stopsToModel returns the CANCEL and ABORT frames the loop wrote into the
// model.
func (s *loopStep) stopsToModel() []*messages.Frame {
	var out []*messages.Frame
	for _, f := range s.toModel() {
		if t := f.GetType(); t == messages.FrameType_CANCEL || t == messages.FrameType_ABORT {
			out = append(out, f)
		}
	}
	return out
}

// stopWhileToolsRun starts a conversation on stream "s" whose model calls
// c1 (tool "wait") and ends its response, stops it with stop (named as in
// stopFrames) while c1 runs, checks that the loop passes the model no
// CANCEL or ABORT (a model with nothing open ignores them), and has the
// tool answer c1 stopped. It returns how many frames the loop had emitted
// by then.
func (s *loopStep) stopWhileToolsRun(name string, stop func(stream string) *messages.Frame) int {
	s.t.Helper()
	s.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s"))
	s.model(messages.ToolCall("s", "c1", "wait", raw(`{}`)), messages.End("s"))
	s.outer(stop("s"))
	if stops := s.stopsToModel(); len(stops) != 0 {
		s.t.Errorf("the loop passed %q to the model, which had nothing open", lines(stops))
	}
	s.tool("wait", stoppedResult("s", "c1", "wait", name == "abort"), messages.End("s"))
	return len(s.r.Emitted)
}

// cleanConversation checks that the frames a consumer got for a
// conversation hold no ERROR and end with the model's answer "hello" and
// END.
func cleanConversation(t *testing.T, got []*messages.Frame) {
	t.Helper()
	for _, f := range got {
		if f.GetType() == messages.FrameType_ERROR {
			t.Errorf("the conversation got an ERROR: %q", lines(got))
			return
		}
	}
	if n := len(got); n < 2 || got[n-2].GetText() != "hello" || !isEnd(got[n-1]) {
		t.Errorf("the conversation got %q, want the model's answer and END", lines(got))
	}
}

// TestLoop_StopWhileToolsRunLeavesReusedStreamClean: without a session,
// the consumer cancels (or aborts) while the calls run, the tools answer
// and the stream ends; then a new conversation starts on the same stream
// id. The model's response had ended, so the loop passes it no CANCEL or
// ABORT (a model with nothing open ignores them), and nothing of the
// cancelled conversation reaches the new one.
func TestLoop_StopWhileToolsRunLeavesReusedStreamClean(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			s := newLoopStep(t, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{
				tools.MustNew(tools.Definition{Name: "wait", Idempotent: true}),
			}}})
			n := s.stopWhileToolsRun(tc.name, tc.stop)
			if n == 0 || !isEnd(s.r.Emitted[n-1]) {
				t.Fatalf("the stream did not end: %q", lines(s.r.Emitted))
			}
			s.outer(messages.RawParam("s", models.ParamMessages, raw(`[{"role":"user","content":"hi again"}]`)), messages.End("s"))
			s.model(messages.Text("s", "hello"), messages.End("s"))
			cleanConversation(t, s.r.Emitted[n:])
		})
	}
}

// TestSession_StopWhileToolsRunLeavesResumeClean: as
// TestLoop_StopWhileToolsRunLeavesReusedStreamClean with a durable
// session, which the consumer then resumes on the same loop and stream id:
// the model gets no CANCEL or ABORT, and the resumed session runs clean
// to the model's answer.
func TestSession_StopWhileToolsRunLeavesResumeClean(t *testing.T) {
	for _, tc := range stopFrames {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store durability.Store) {
				s := newLoopStep(t, cancelRoundOptions(store))
				n := s.stopWhileToolsRun(tc.name, tc.stop)
				s.outer(messages.RawParam("s", models.ParamMessages, raw(cancelFirst)), messages.End("s")) // the resume
				s.model(messages.Text("s", "hello"), messages.End("s"))
				cleanConversation(t, s.r.Emitted[n:])
			})
		})
	}
}
