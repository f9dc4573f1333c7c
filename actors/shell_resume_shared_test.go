package actors

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// The tests here resume a duplex whose failed call shares its stream
// with other calls in flight, as a dispatcher's calls of one model
// response share its stream on a tool actor: the Resume answers the
// failed call alone, and every other call of the stream gets its one
// answer, its own.

// sharedCalls is a duplex "d" that serves tool calls as a tool actor
// does, several on a stream: each call is answered with one TOOL_RESULT
// and an END, both carrying its tool-call id. A call named "hold" waits
// for a call named "release" (on any stream), which answers it "done";
// one named "fail" fails the duplex, as does the caller's END of a
// stream named "e" (a frame of the stream, of no call). A streaming call's argument chunks
// are collected ("fail" among them fails the duplex), and the call is
// answered at its tool_complete with what came ("args:..."). A CANCEL
// answers the calls it names (with no tool-call id: all of its stream's)
// "cancelled", unless ignoreCancel, and one of a call "x" fails it; the caller's END answers the
// streaming calls of its stream still collecting "cut".
func sharedCalls(ignoreCancel bool) Spec {
	return Spec{Name: "d", New: func() Logic {
		held := map[callOf]bool{}   // the held calls
		args := map[callOf]string{} // the streaming calls collecting
		var order []callOf          // held and collecting calls, in the order they came
		answer := func(c Context, k callOf, text string) {
			delete(held, k)
			delete(args, k)
			order = slices.DeleteFunc(order, func(o callOf) bool { return o == k })
			c.Emit(messages.RawToolResult(k.stream, k.id, "t", []byte(`"`+text+`"`)))
			c.Emit(&messages.Frame{Type: messages.FrameType_END, StreamId: k.stream, ToolCallId: k.id})
		}
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			k := callOf{f.GetStreamId(), f.GetToolCallId()}
			switch {
			case f.IsStreamingToolCall():
				args[k] = ""
				order = append(order, k)
			case f.GetType() == messages.FrameType_TOOL_CALL:
				switch f.GetName() {
				case "fail":
					c.Fail(errors.New("boom"))
				case "hold":
					held[k] = true
					order = append(order, k)
				case "release":
					for _, h := range slices.Clone(order) {
						if held[h] {
							answer(c, h, "done")
						}
					}
					answer(c, k, "released")
				}
			case f.IsToolArgChunk():
				if f.GetText() == "fail" {
					c.Fail(errors.New("boom"))
				}
				if a, ok := args[k]; ok {
					args[k] = a + f.GetText()
				}
			case f.IsToolComplete():
				if a, ok := args[k]; ok {
					answer(c, k, "args:"+a)
				}
			case f.GetType() == messages.FrameType_CANCEL:
				if k.id == "x" {
					c.Fail(errors.New("cancel failed"))
				}
				if ignoreCancel {
					return
				}
				for _, o := range slices.Clone(order) {
					if o.stream == k.stream && (k.id == "" || o.id == k.id) {
						answer(c, o, "cancelled")
					}
				}
			case f.GetType() == messages.FrameType_END:
				if k.stream == "e" {
					c.Fail(errors.New("boom"))
				}
				for _, o := range slices.Clone(order) {
					if _, collecting := args[o]; collecting && o.stream == k.stream {
						answer(c, o, "cut")
					}
				}
			}
		})
	}}
}

// callOf names a call: its stream and tool-call id.
type callOf struct{ stream, id string }

// answersByCall sends frames into sharedCalls under a supervisor that
// resumes it, then a release call "r" on stream "g", and returns what
// came out up to r's END, by tool-call id (frames with none under ""),
// each as frameLabel records it.
func answersByCall(t *testing.T, ignoreCancel bool, frames ...*messages.Frame) map[string][]string {
	t.Helper()
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(sharedCalls(ignoreCancel))
	if err != nil {
		t.Fatal(err)
	}
	frames = append(frames, messages.ToolCall("g", "r", "release", nil))
	if err := conn.SendAll(frames...); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	got := map[string][]string{}
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v after %q", err, got)
		}
		got[f.GetToolCallId()] = append(got[f.GetToolCallId()], frameLabel(f))
		if f.GetStreamId() == "g" && f.GetType() == messages.FrameType_END {
			return got
		}
	}
}

// failedAnswer is the Resume's answer to a call on stream.
func failedAnswer(stream string) []string {
	return []string{stream + ":ERROR(boom)[" + FailedKind + "]", stream + ":END"}
}

// toolAnswer is the Logic's answer text to a call on stream.
func toolAnswer(stream, text string) []string {
	return []string{stream + `:TOOL_RESULT("` + text + `")`, stream + ":END"}
}

// TestShell_ResumeOnASharedStream: calls on one stream, some in flight,
// one failing the duplex, which its supervisor resumes. Every call gets
// exactly one answer: the failed one the Resume's, the others their own.
func TestShell_ResumeOnASharedStream(t *testing.T) {
	for _, tc := range []struct {
		name         string
		why          string
		ignoreCancel bool
		frames       []*messages.Frame
		want         map[string][]string // by tool-call id
	}{{
		name: "held call answered",
		why: "the Resume answers the failed call alone, its ERROR and END carrying its id; the Logic gets a " +
			"CANCEL of that call, not of the stream, and the held call gets its own answer when released",
		frames: []*messages.Frame{messages.ToolCall("s", "c1", "hold", nil), messages.ToolCall("s", "c2", "fail", nil)},
		want:   map[string][]string{"c1": toolAnswer("s", "done"), "c2": failedAnswer("s")},
	}, {
		name: "CANCEL unanswered",
		why: "what a Logic that does not answer the CANCEL emits on the stream after the Resume, the held " +
			"call's answer, is that call's, not the failed call's to be dropped",
		ignoreCancel: true,
		frames:       []*messages.Frame{messages.ToolCall("s", "c1", "hold", nil), messages.ToolCall("s", "c2", "fail", nil)},
		want:         map[string][]string{"c1": toolAnswer("s", "done"), "c2": failedAnswer("s")},
	}, {
		name: "other calls' frames delivered",
		why: "what the caller sends on the stream after the Resume's answer reaches the Logic but for the " +
			"failed call's rest (its chunks, its completion): another call's CANCEL, the chunks and completion " +
			"of a streaming call interleaved with the failed one, and the caller's END of the stream, which " +
			"the Logic answers for the calls still collecting their arguments",
		frames: []*messages.Frame{
			messages.ToolCall("s", "c1", "hold", nil),
			messages.ToolCall("s", "c3", "hold", nil),
			messages.StreamingToolCall("s", "c4", "t"),
			messages.StreamingToolCall("s", "c5", "t"),
			messages.StreamingToolCall("s", "c6", "t"),
			messages.StreamingToolCall("s", "c2", "t"),
			messages.ToolArgChunk("s", "c4", "{"),
			messages.ToolArgChunk("s", "c2", "fail"),
			messages.ToolArgChunk("s", "c2", "more"),
			messages.ToolArgChunk("s", "c4", "}"),
			messages.ToolComplete("s", "c4"),
			messages.ToolComplete("s", "c2"),
			messages.Cancel("s", "c3"),
			messages.ToolArgChunk("s", "c5", "[1"),
			messages.End("s"),
		},
		want: map[string][]string{
			"c1": toolAnswer("s", "done"), "c2": failedAnswer("s"), "c3": toolAnswer("s", "cancelled"),
			"c4": toolAnswer("s", "args:{}"), "c5": toolAnswer("s", "cut"), "c6": toolAnswer("s", "cut"),
		},
	}, {
		name: "streaming call failed",
		why: "the failed call is a streaming call, failing on a chunk: the Logic's answer to the CANCEL of it " +
			"is dropped, and so is its completion, still in flight; the held call is answered",
		frames: []*messages.Frame{
			messages.ToolCall("s", "c1", "hold", nil),
			messages.StreamingToolCall("s", "c2", "t"),
			messages.ToolArgChunk("s", "c2", "fail"),
			messages.ToolComplete("s", "c2"),
		},
		want: map[string][]string{"c1": toolAnswer("s", "done"), "c2": failedAnswer("s")},
	}, {
		name:   "lone call",
		why:    "a call alone on its stream: the Resume answers the stream, as ever, its ERROR and END carrying the call's id",
		frames: []*messages.Frame{messages.ToolCall("s", "c2", "fail", nil)},
		want:   map[string][]string{"c2": failedAnswer("s")},
	}, {
		name: "frame of no call failed",
		why: "the caller's END of the stream (it carries no id) fails the duplex: the failed call is the " +
			"stream's, answered with no id for both its calls; the Logic's answers to the CANCEL of the " +
			"stream, each with its END, are dropped",
		frames: []*messages.Frame{
			messages.ToolCall("e", "c1", "hold", nil), messages.ToolCall("e", "c3", "hold", nil), messages.End("e"),
		},
		want: map[string][]string{"": failedAnswer("e")},
	}, {
		name: "CANCEL failed",
		why: "the Logic fails again on the CANCEL with which the runtime stops the answered call, and is " +
			"resumed again: that CANCEL is none of the stream's calls, the second Resume answers none",
		frames: []*messages.Frame{messages.ToolCall("s", "c1", "hold", nil), messages.ToolCall("s", "x", "fail", nil)},
		want:   map[string][]string{"c1": toolAnswer("s", "done"), "x": failedAnswer("s")},
	}, {
		name: "call of no id beside the failed one",
		why: "the stream carries a call whose frames carry no id beside the failed call: the Resume answers " +
			"the failed call alone, with its id, and the call of no id goes on, answered by the Logic when released",
		frames: []*messages.Frame{messages.ToolCall("s", "", "hold", nil), messages.ToolCall("s", "c2", "fail", nil)},
		want:   map[string][]string{"": toolAnswer("s", "done"), "c2": failedAnswer("s")},
	}, {
		name: "call of no id failed beside one with an id",
		why: "the failed frame carries no id, and the stream carries a call with one: the Resume answers the " +
			"stream for both, with no id, not the other call with its id as though it had failed",
		frames: []*messages.Frame{messages.ToolCall("s", "c1", "hold", nil), messages.ToolCall("s", "", "fail", nil)},
		want:   map[string][]string{"": failedAnswer("s")},
	}, {
		name: "late chunk of an ended call failed",
		why: "the Logic fails on an argument chunk of a call it answered and ended by its id, still on its " +
			"way: that call has its answer, and the failure is none of the stream's other calls, which the " +
			"Logic answers (the Resume answering the held call with it would fail a call that did not fail)",
		frames: []*messages.Frame{
			messages.ToolCall("s", "c1", "hold", nil),
			messages.StreamingToolCall("s", "c2", "t"), messages.ToolArgChunk("s", "c2", "1"), messages.ToolComplete("s", "c2"),
			messages.ToolArgChunk("s", "c2", "fail"), // c2 answered and ended: its late chunk
		},
		want: map[string][]string{"c1": toolAnswer("s", "done"), "c2": toolAnswer("s", "args:1")},
	}, {
		name: "CANCEL of an ended call failed",
		why: "the Logic fails on the caller's CANCEL of a call it answered and ended by its id: the call of no " +
			"id beside it is the Logic's to answer, not failed with it",
		frames: []*messages.Frame{
			messages.ToolCall("s", "", "hold", nil),
			messages.StreamingToolCall("s", "x", "t"), messages.ToolComplete("s", "x"),
			messages.Cancel("s", "x"), // x answered and ended: its caller's late CANCEL
		},
		want: map[string][]string{"": toolAnswer("s", "done"), "x": toolAnswer("s", "args:")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := answersByCall(t, tc.ignoreCancel, tc.frames...)
			tc.want["r"] = toolAnswer("g", "released")
			for _, id := range slices.Sorted(maps.Keys(got)) {
				if w, ok := tc.want[id]; !ok || !slices.Equal(got[id], w) {
					t.Errorf("call %q got %q, want %q: %s", id, got[id], w, tc.why)
				}
			}
			for _, id := range slices.Sorted(maps.Keys(tc.want)) {
				if _, ok := got[id]; !ok {
					t.Errorf("call %q got no answer, want %q: %s", id, tc.want[id], tc.why)
				}
			}
		})
	}
}
