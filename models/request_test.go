package models_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

type emitted []*messages.Frame

func (e *emitted) emit(f *messages.Frame) { *e = append(*e, f) }

func kinds(frames []*messages.Frame) []string {
	var out []string
	for _, f := range frames {
		s := f.GetType().String()
		if f.GetType() == messages.FrameType_ERROR {
			s += "(" + f.GetText() + ")"
		}
		out = append(out, f.GetStreamId()+":"+s)
	}
	return out
}

func TestTracker_GathersParamsUntilEnd(t *testing.T) {
	var tr models.Tracker
	var out emitted
	if req := tr.Frame(messages.RawParam("s", "model", json.RawMessage(`"a"`)), out.emit); req != nil {
		t.Fatal("a PARAM completed a request")
	}
	tr.Frame(messages.RawParam("s", "model", json.RawMessage(`"b"`)), out.emit)
	tr.Frame(messages.Tick("s"), out.emit)
	req := tr.Frame(messages.End("s"), out.emit)
	if req == nil {
		t.Fatal("END did not complete the request")
	}
	if v, _ := req.Param("model"); string(v) != `"b"` {
		t.Fatalf("model = %s, want the last value \"b\"", v)
	}
	if _, ok := req.Param("tools"); ok {
		t.Fatal("found a PARAM that was never sent")
	}
	if !tr.Live(req) {
		t.Fatal("started request is not live")
	}
	if got := kinds(req.Frames()); !slices.Equal(got, []string{"s:PARAM", "s:PARAM", "s:END"}) {
		t.Fatalf("Frames = %v", got)
	}
	if next := tr.Done(req); next != nil || tr.Live(req) || tr.Open() != 0 {
		t.Fatalf("after Done: next %v, live %v, open %d", next, tr.Live(req), tr.Open())
	}
	if len(out) != 0 {
		t.Fatalf("tracker emitted %v", kinds(out))
	}
}

func TestTracker_QueuesSecondRequestOfAStream(t *testing.T) {
	var tr models.Tracker
	var out emitted
	first := tr.Frame(messages.End("s"), out.emit)
	tr.Frame(messages.RawParam("s", "messages", json.RawMessage(`[]`)), out.emit)
	if second := tr.Frame(messages.End("s"), out.emit); second != nil {
		t.Fatal("second request started while the first is active")
	}
	other := tr.Frame(messages.End("o"), out.emit)
	if other == nil {
		t.Fatal("another stream's request was held back")
	}
	next := tr.Done(first)
	if next == nil {
		t.Fatal("queued request not handed over")
	}
	if _, ok := next.Param("messages"); !ok || !tr.Live(next) {
		t.Fatal("handed over the wrong request")
	}
	if tr.Done(first) != nil {
		t.Fatal("Done of a finished request did something")
	}
}

func TestTracker_CancelAnswersEveryOpenRequest(t *testing.T) {
	var tr models.Tracker
	var out emitted
	stopped := 0
	active := tr.Frame(messages.End("s"), out.emit)
	tr.Start(active, func() { stopped++ })
	tr.Frame(messages.End("s"), out.emit)                                       // queued
	tr.Frame(messages.RawParam("s", "model", json.RawMessage(`"m"`)), out.emit) // pending
	tr.Frame(messages.Cancel("s", "call_1"), out.emit)
	if stopped != 0 || len(out) != 0 {
		t.Fatal("a CANCEL naming a tool call stopped the model request")
	}
	tr.Frame(messages.Cancel("s", ""), out.emit)
	if stopped != 1 {
		t.Fatalf("stop called %d times, want 1", stopped)
	}
	want := []string{"s:ERROR(cancelled)", "s:END", "s:ERROR(cancelled)", "s:END", "s:ERROR(cancelled)", "s:END"}
	if got := kinds(out); !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
	if tr.Live(active) || tr.Open() != 0 {
		t.Fatal("cancelled request still tracked")
	}
	out = nil
	tr.Frame(messages.Abort("s"), out.emit)
	if len(out) != 0 {
		t.Fatalf("ABORT of an idle stream emitted %v", kinds(out))
	}
	if models.ErrCancelled.Error() != "cancelled" {
		t.Fatal("ErrCancelled text changed")
	}
}

func TestResponse_ReadsTextCallsAndMeta(t *testing.T) {
	frames := []*messages.Frame{
		messages.Text("s", "Hel"), messages.Text("s", "lo"),
		withIndex(messages.ToolCall("s", "c1", "read", json.RawMessage(`{"p":1}`)), 0),
		withIndex(messages.StreamingToolCall("s", "c2", "write"), 1),
		messages.ToolArgChunk("s", "c2", `{"a"`), messages.ToolArgChunk("s", "c2", `:2}`),
		messages.ToolComplete("s", "c2"),
		models.UsageFrame("s", json.RawMessage(`{"total_tokens":3}`)),
		models.FinishFrame("s", "tool_calls"),
		messages.End("s"),
	}
	r, err := models.ReadResponse(frames)
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "Hello" || r.Finish != "tool_calls" || string(r.Usage) != `{"total_tokens":3}` || !r.Ended || r.Failed {
		t.Fatalf("read %+v", r)
	}
	if len(r.ToolCalls) != 2 || r.ToolCalls[1].ID != "c2" || string(r.ToolCalls[1].Arguments) != `{"a":2}` || !r.ToolCalls[1].Streamed {
		t.Fatalf("calls %+v", r.ToolCalls)
	}
}

func withIndex(f *messages.Frame, i uint32) *messages.Frame {
	if f.Meta == nil {
		f.Meta = &messages.Metadata{}
	}
	f.Meta.Index = i
	return f
}

func TestResponse_RejectsContractViolations(t *testing.T) {
	cases := map[string][]*messages.Frame{
		"after END":         {messages.End("s"), messages.Text("s", "x")},
		"other stream":      {messages.Text("s", "x"), messages.Text("o", "y")},
		"after ERROR":       {messages.Error("s", "boom"), messages.Text("s", "x")},
		"duplicate id":      {messages.ToolCall("s", "c", "n", json.RawMessage(`{}`)), withIndex(messages.ToolCall("s", "c", "n", json.RawMessage(`{}`)), 1)},
		"wrong index":       {withIndex(messages.ToolCall("s", "c", "n", json.RawMessage(`{}`)), 3)},
		"invalid atomic":    {messages.ToolCall("s", "c", "n", json.RawMessage(`{"a":`))},
		"invalid streamed":  {messages.StreamingToolCall("s", "c", "n"), messages.ToolArgChunk("s", "c", `{"a":`), messages.ToolComplete("s", "c")},
		"unknown chunk":     {messages.ToolArgChunk("s", "c", `{}`)},
		"unknown complete":  {messages.ToolComplete("s", "c")},
		"open at END":       {messages.StreamingToolCall("s", "c", "n"), messages.End("s")},
		"finish not string": {messages.Meta("s", models.MetaFinish, json.RawMessage(`3`))},
		"no name":           {messages.ToolCall("s", "c", "", json.RawMessage(`{}`))},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := models.ReadResponse(frames)
			var pe *models.ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a ProtocolError", err)
			}
		})
	}
	// A streaming call left open is fine when the response failed.
	if _, err := models.ReadResponse([]*messages.Frame{
		messages.StreamingToolCall("s", "c", "n"), messages.ToolArgChunk("s", "c", `{"a":`),
		messages.Error("s", "cut off"), messages.End("s"),
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTracker_StreamsApart: requests of several streams open at once are
// kept apart, whichever ends or is cancelled first, and a stream that
// comes after them is tracked as the first was.
func TestTracker_StreamsApart(t *testing.T) {
	var tr models.Tracker
	var out emitted
	reqs := map[string]*models.Request{}
	for _, id := range []string{"a", "b", "c"} {
		tr.Frame(messages.RawParam(id, "model", json.RawMessage(`"`+id+`"`)), out.emit)
		reqs[id] = tr.Frame(messages.End(id), out.emit)
		if reqs[id] == nil || reqs[id].StreamID != id {
			t.Fatalf("stream %s: request %+v", id, reqs[id])
		}
		if v, _ := reqs[id].Param("model"); string(v) != `"`+id+`"` {
			t.Fatalf("stream %s: model %s", id, v)
		}
	}
	stopped := ""
	for id, r := range reqs {
		tr.Start(r, func() { stopped += id })
	}
	if tr.Open() != 3 {
		t.Fatalf("%d streams open, want 3", tr.Open())
	}
	tr.Frame(messages.Cancel("b", ""), out.emit)
	if stopped != "b" || !slices.Equal(kinds(out), []string{"b:ERROR(cancelled)", "b:END"}) || tr.Live(reqs["b"]) {
		t.Fatalf("cancelling b: stopped %q, emitted %v", stopped, kinds(out))
	}
	if tr.Done(reqs["a"]) != nil || tr.Live(reqs["a"]) || !tr.Live(reqs["c"]) || tr.Open() != 1 {
		t.Fatal("a's end touched another stream")
	}
	d := tr.Frame(messages.End("d"), out.emit)
	if !tr.Live(d) || !tr.Live(reqs["c"]) || tr.Open() != 2 {
		t.Fatal("a new stream is not tracked beside c")
	}
	tr.Frame(messages.Abort("c"), out.emit)
	if stopped != "bc" || tr.Live(reqs["c"]) || !tr.Live(d) {
		t.Fatalf("aborting c: stopped %q", stopped)
	}
	if tr.Done(d) != nil || tr.Open() != 0 {
		t.Fatalf("%d streams open after all ended", tr.Open())
	}
}

// TestTracker_ReleasedRequestIsReused: the next request of any stream is
// made in the storage of the one released, without allocating, and holds
// nothing of it; a request not released is never reused, and releasing
// one still answered or queued is ignored.
func TestTracker_ReleasedRequestIsReused(t *testing.T) {
	var tr models.Tracker
	var out emitted
	tr.Frame(messages.RawParam("s", "model", json.RawMessage(`"a"`)), out.emit)
	tr.Frame(messages.RawParam("s", "tools", json.RawMessage(`[]`)), out.emit)
	first := tr.Frame(messages.End("s"), out.emit)
	tr.Frame(messages.RawParam("s", "model", json.RawMessage(`"q"`)), out.emit) // a second request, queued
	if r := tr.Frame(messages.End("s"), out.emit); r != nil {
		t.Fatal("a second request of the stream started at once")
	}
	tr.Release(first) // still active: ignored
	second := tr.Done(first)
	if second == nil {
		t.Fatal("queued request not handed over")
	}
	tr.Release(second) // active now: ignored
	if v, _ := second.Param("model"); string(v) != `"q"` || len(first.Params) != 2 {
		t.Fatalf("a request answered or queued was released: %+v, %+v", first, second)
	}
	if tr.Done(second) != nil {
		t.Fatal("nothing was queued")
	}
	tr.Release(second)
	tr.Frame(messages.RawParam("o", "messages", json.RawMessage(`[]`)), out.emit)
	third := tr.Frame(messages.End("o"), out.emit)
	if third != second {
		t.Fatal("the released request was not reused")
	}
	if third.StreamID != "o" || len(third.Params) != 1 || third.Params[0].Name != "messages" {
		t.Fatalf("reused request: %+v", third)
	}
	if v, _ := first.Param("model"); string(v) != `"a"` {
		t.Fatal("a request never released changed")
	}
	tr.Done(third)
	tr.Release(third)
	if bare := tr.Frame(messages.End("o"), out.emit); bare != third || len(bare.Params) != 0 {
		t.Fatalf("a request without PARAMs: %+v, want the released one, empty", bare)
	}

	param, end := messages.RawParam("s", "messages", json.RawMessage(`[]`)), messages.End("s")
	allocs := testing.AllocsPerRun(100, func() {
		tr.Frame(param, out.emit)
		req := tr.Frame(end, out.emit)
		tr.Done(req)
		tr.Release(req)
	})
	if allocs != 0 && !raceDetector {
		t.Errorf("a request released and made again allocates %.0f times, want 0", allocs)
	}
	if len(out) != 0 {
		t.Fatalf("tracker emitted %v", kinds(out))
	}
}

// A CANCEL between a request's PARAMs and its END answers that request
// (ERROR and END) at once, so that a client abandoning it never waits;
// its late END then makes no second answer. A PARAM after the CANCEL
// starts a new request, answered as usual.
func TestTracker_LateEndOfACancelledRequestIsSwallowed(t *testing.T) {
	var tr models.Tracker
	var out emitted
	tr.Frame(messages.RawParam("s", "messages", json.RawMessage(`[]`)), out.emit)
	tr.Frame(messages.Cancel("s", ""), out.emit)
	if got, want := kinds(out), []string{"s:ERROR(cancelled)", "s:END"}; !slices.Equal(got, want) {
		t.Fatalf("CANCEL emitted %v, want %v", got, want)
	}
	out = nil
	if req := tr.Frame(messages.End("s"), out.emit); req != nil || len(out) != 0 || tr.Open() != 0 {
		t.Fatalf("the late END of the cancelled request started %v (emitted %v, %d open): a second answer to it", req, kinds(out), tr.Open())
	}
	// The next request of the stream is answered.
	if req := tr.Frame(messages.End("s"), out.emit); req == nil {
		t.Fatal("the request after the late END was not started")
	} else {
		tr.Done(req)
	}

	// A client that abandons its request and sends a new one without
	// the END of the first is answered too.
	tr.Frame(messages.RawParam("s", "messages", json.RawMessage(`[1]`)), out.emit)
	tr.Frame(messages.Abort("s"), out.emit)
	tr.Frame(messages.RawParam("s", "messages", json.RawMessage(`[2]`)), out.emit)
	req := tr.Frame(messages.End("s"), out.emit)
	if req == nil {
		t.Fatal("a new request after the CANCEL was swallowed")
	}
	if v, _ := req.Param("messages"); string(v) != `[2]` || len(req.Params) != 1 {
		t.Fatalf("new request holds %v, want only the PARAM sent after the CANCEL", req.Params)
	}
	tr.Done(req)
	if req := tr.Frame(messages.End("s"), out.emit); req == nil {
		t.Fatal("an END after an answered request was swallowed")
	}
}

// BenchmarkTracker_RequestWhileCancelsRemembered: a request made and
// answered (PARAM, END, Done) while 256 streams cancelled before their
// END are remembered costs what it costs with none: finding whether a
// stream is one of them does not go through them all.
func BenchmarkTracker_RequestWhileCancelsRemembered(b *testing.B) {
	var tr models.Tracker
	discard := func(*messages.Frame) {}
	for i := range 256 {
		id := "abandoned" + strconv.Itoa(i)
		tr.Frame(messages.RawParam(id, "messages", json.RawMessage(`[]`)), discard)
		tr.Frame(messages.Cancel(id, ""), discard)
	}
	param, end := messages.RawParam("s", "messages", json.RawMessage(`[]`)), messages.End("s")
	b.ReportAllocs()
	for b.Loop() {
		tr.Frame(param, discard)
		req := tr.Frame(end, discard)
		tr.Done(req)
		tr.Release(req)
	}
}
