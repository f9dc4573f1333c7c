package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// weather is an example tool for the loop transcripts.
func weather() *tools.Tool {
	return tools.MustNewTyped(tools.Definition{Name: "weather", Description: "Current weather in a city",
		Capabilities: []string{"read"}},
		func(ctx context.Context, in struct {
			City string `json:"city"`
		}) (map[string]any, error) {
			temps := map[string]int{"Paris": 18, "Oslo": 4}
			return map[string]any{"city": in.City, "celsius": temps[in.City]}, nil
		})
}

// runLoop sends one request through a loop around a scripted model and
// returns the transcript of what everyone saw.
func runLoop(t *testing.T, name string, opts *tools.LoopOptions, script [][]*messages.Frame, in []*messages.Frame) (out []*messages.Frame, toModel []*messages.Frame) {
	t.Helper()
	model := newSink()
	out = sendLoop(t, script, model.observe, opts, in)
	var tr transcript
	tr.section("consumer -> loop", in)
	for i := range script {
		req := model.until(t, isEnd)
		toModel = append(toModel, req...)
		tr.section("loop -> model (request "+string(rune('1'+i))+")", req)
		tr.section("model -> loop (response "+string(rune('1'+i))+")", script[i])
	}
	tr.section("loop -> consumer", out)
	tr.check(t, name)
	return out, toModel
}

// startLoop starts on rt a loop with opts around a scripted model (whose
// requests go to observe, unless nil) and writes it in.
func startLoop(t *testing.T, rt *actors.Runtime, script [][]*messages.Frame, observe func(*messages.Frame), opts *tools.LoopOptions, in []*messages.Frame) *actors.Conn {
	t.Helper()
	spec, err := tools.NewLoop(tooltest.ScriptedModel("model", script, observe), opts)
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.SendAll(in...); err != nil {
		t.Fatal(err)
	}
	return conn
}

// sendLoop starts a loop with opts around a scripted model (whose
// requests go to observe, unless nil) on a runtime of t's, sends it in
// and returns what it answered on in's stream.
func sendLoop(t *testing.T, script [][]*messages.Frame, observe func(*messages.Frame), opts *tools.LoopOptions, in []*messages.Frame) []*messages.Frame {
	t.Helper()
	conn := startLoop(t, newRuntime(t), script, observe, opts, in)
	out, err := conn.RecvStream(testCtx(t), in[0].GetStreamId())
	if err != nil {
		t.Fatalf("%v after %q", err, lines(out))
	}
	return out
}

func request(stream string) []*messages.Frame {
	return []*messages.Frame{
		messages.RawParam(stream, "model", raw(`"gpt-test"`)),
		messages.RawParam(stream, "temperature", raw(`0`)),
		messages.RawParam(stream, "messages", raw(`[{"role":"user","content":"Weather in Paris and Oslo?"}]`)),
		messages.End(stream),
	}
}

// TestLoop_Golden: a response with text and two parallel calls, a second
// response with one streamed call, then the answer.
func TestLoop_Golden(t *testing.T) {
	var mu sync.Mutex
	var events []string
	opts := &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}},
		ToolChoice:    raw(`"auto"`),
		SystemPrompt:  "You are terse.",
		OnToolResult: func(e tools.ToolResultEvent) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e.Call.GetToolCallId()+"="+string(e.Result.GetPayload()))
		},
	}
	script := [][]*messages.Frame{
		{
			messages.Text("", "Checking both."),
			messages.ToolCall("", "call_1", "weather", raw(`{"city":"Paris"}`)),
			messages.ToolCall("", "call_2", "weather", raw(`{"city":"Oslo"}`)),
			messages.End(""),
		},
		{
			messages.StreamingToolCall("", "call_3", "weather"),
			messages.ToolArgChunk("", "call_3", `{"ci`),
			messages.ToolArgChunk("", "call_3", `ty":"Rome"}`),
			messages.ToolComplete("", "call_3"),
			messages.End(""),
		},
		{
			messages.Text("", "Paris 18°C, Oslo 4°C."),
			messages.Meta("", "usage", raw(`{"total_tokens":99}`)),
			messages.End(""),
		},
	}
	runLoop(t, "loop", opts, script, request("s1"))
	mu.Lock()
	defer mu.Unlock()
	want := []string{`call_1={"celsius":18,"city":"Paris"}`, `call_2={"celsius":4,"city":"Oslo"}`, `call_3={"celsius":0,"city":"Rome"}`}
	if !slices.Equal(events, want) {
		t.Fatalf("OnToolResult saw %q, want %q", events, want)
	}
}

// lastMessages decodes the messages PARAM of the last request.
func lastMessages(t *testing.T, toModel []*messages.Frame) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, f := range toModel {
		if f.IsParam("messages") {
			msgs = nil
			if err := f.Decode(&msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	return msgs
}

// TestLoop_IterationLimit: after MaxIterations rounds the follow-up ends
// with the final system prompt; calls made after it are refused (each
// with its one result) and the stream ends.
func TestLoop_IterationLimit(t *testing.T) {
	call := func(id string) []*messages.Frame {
		return []*messages.Frame{messages.ToolCall("", id, "weather", raw(`{"city":"Paris"}`)), messages.End("")}
	}
	opts := &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}}, MaxIterations: 2}
	out, toModel := runLoop(t, "loop_limit", opts, [][]*messages.Frame{call("c1"), call("c2"), call("c3")}, request("s1"))
	msgs := lastMessages(t, toModel)
	if last := msgs[len(msgs)-1]; last["role"] != "system" || last["content"] != tools.DefaultFinalSystemPrompt {
		t.Fatalf("last message of the final follow-up: %v", last)
	}
	final := out[len(out)-2]
	if final.GetToolCallId() != "c3" || tools.KindOf(final) != tools.FailureLimit {
		t.Fatalf("call after the limit answered with %s", line(final))
	}
}

// TestLoop_ModelError: a model failing mid-response ends the stream with
// ERROR and END; a call it had already surfaced gets its result first.
func TestLoop_ModelError(t *testing.T) {
	script := [][]*messages.Frame{{
		messages.Text("", "Let me"),
		messages.ToolCall("", "c1", "weather", raw(`{"city":"Paris"}`)),
		messages.Error("", "upstream 503"),
		messages.End(""),
	}}
	opts := &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}}}
	runLoop(t, "loop_model_error", opts, script, request("s1"))
}

// TestLoop_NoToolsAnswer: a response without calls passes through and
// ends the stream; no tools PARAM is injected when there are no tools.
func TestLoop_NoToolsAnswer(t *testing.T) {
	script := [][]*messages.Frame{{messages.Text("", "Hi."), messages.End("")}}
	out, toModel := runLoop(t, "loop_plain", nil, script, request("s1"))
	if want := []string{`TEXT stream=s1 text="Hi."`, `END stream=s1`}; !slices.Equal(lines(out), want) {
		t.Fatalf("got %q", lines(out))
	}
	for _, f := range toModel {
		if f.IsParam("tools") {
			t.Fatal("tools PARAM injected without tools")
		}
	}
}

// TestLoop_Cancel: a CANCEL while the tools run cancels them; the calls
// get cancelled results and the stream ends without a follow-up.
func TestLoop_Cancel(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	running := make(chan struct{})
	block := tools.MustNew(tools.Definition{Name: "block", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(running)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	conn := startLoop(t, rt, [][]*messages.Frame{{
		messages.ToolCall("", "c1", "block", nil), messages.End(""),
	}}, model.observe, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{block}}}, request("s1"))
	<-running
	if err := conn.Send(messages.Cancel("s1", "")); err != nil {
		t.Fatal(err)
	}
	out, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`TOOL_CALL stream=s1 id=c1 name=block`,
		`TOOL_RESULT stream=s1 id=c1 name=block is_error failure_kind=cancelled payload={"success":false,"error":"Tool call cancelled"}`,
		`END stream=s1`,
	}
	if !slices.Equal(lines(out), want) {
		t.Fatalf("got %q, want %q", lines(out), want)
	}
}

// TestInstaller_OnceInjection: with Once, the first request gets tools,
// tool_choice and the system prompt; the second passes unchanged; calls
// are routed to the handlers.
func TestInstaller_OnceInjection(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	spec, err := tools.NewInstaller(tooltest.ScriptedModel("model", [][]*messages.Frame{
		{messages.ToolCall("", "c1", "weather", raw(`{"city":"Oslo"}`)), messages.End("")},
		{messages.Text("", "ok"), messages.End("")},
	}, model.observe), &tools.InstallerOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}},
		ToolChoice:    raw(`"required"`),
		SystemPrompt:  "Be brief.",
		Once:          true,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	first := []*messages.Frame{messages.RawParam("s", "messages", raw(`[{"role":"user","content":"hi"}]`)), messages.End("s")}
	if err := conn.SendAll(first...); err != nil {
		t.Fatal(err)
	}
	got := lines(model.until(t, isEnd))
	want := []string{
		`PARAM stream=s name=tools payload=[{"type":"function","function":{"name":"weather","description":"Current weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}]`,
		`PARAM stream=s name=tool_choice payload="required"`,
		`PARAM stream=s name=messages payload=[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`,
		`END stream=s`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("first request:\n%q\nwant\n%q", got, want)
	}
	if r := model.results(t, 1)[0]; string(r.GetPayload()) != `{"celsius":4,"city":"Oslo"}` {
		t.Fatalf("routed result %s", line(r))
	}
	second := []*messages.Frame{messages.RawParam("s", "messages", raw(`[{"role":"user","content":"again"}]`)), messages.End("s")}
	if err := conn.SendAll(second...); err != nil {
		t.Fatal(err)
	}
	if got := lines(model.until(t, isEnd)); !slices.Equal(got, lines(second)) {
		t.Fatalf("second request changed: %q", got)
	}
}

// TestLoop_ParallelResultsInCallOrder: the calls of one response run at
// the same time (the first waits until the second has finished), and
// their results — also those of an unknown tool and of invalid arguments —
// go out and back to the model in call order.
func TestLoop_ParallelResultsInCallOrder(t *testing.T) {
	model := newSink()
	secondDone := make(chan struct{})
	pair := tools.MustNew(tools.Definition{Name: "pair",
		Schema: raw(`{"type":"object","properties":{"first":{"type":"boolean"}}}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			if string(args) == `{"first":true}` {
				select {
				case <-secondDone:
					return "first", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			close(secondDone)
			return "second", nil
		}})
	out := sendLoop(t, [][]*messages.Frame{
		{
			messages.ToolCall("", "c1", "pair", raw(`{"first":true}`)),
			messages.ToolCall("", "c2", "pair", raw(`{}`)),
			messages.ToolCall("", "c3", "missing", raw(`{}`)),
			messages.ToolCall("", "c4", "pair", raw(`{"first":"yes"}`)),
			messages.End(""),
		},
		{messages.Text("", "done"), messages.End("")},
	}, model.observe, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{pair}}}, request("s"))
	var results []string
	for _, f := range out {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			results = append(results, f.GetToolCallId()+":"+string(tools.KindOf(f)))
		}
	}
	if want := []string{"c1:", "c2:", "c3:unknown_tool", "c4:invalid_arguments"}; !slices.Equal(results, want) {
		t.Fatalf("results %q, want %q", results, want)
	}
	model.until(t, isEnd) // the first request
	var ids []string
	for _, m := range lastMessages(t, model.until(t, isEnd)) {
		if m["role"] == "tool" {
			ids = append(ids, m["tool_call_id"].(string))
		}
	}
	if want := []string{"c1", "c2", "c3", "c4"}; !slices.Equal(ids, want) {
		t.Fatalf("tool messages for %q, want %q", ids, want)
	}
}

// TestLoop_HookPanic: a panic in OnToolResult fails the loop actor; each
// surfaced call still gets exactly one result and the stream ends with
// ERROR and END.
func TestLoop_HookPanic(t *testing.T) {
	out := sendLoop(t, [][]*messages.Frame{{
		messages.ToolCall("", "c1", "weather", raw(`{"city":"Paris"}`)),
		messages.ToolCall("", "c2", "weather", raw(`{"city":"Oslo"}`)),
		messages.End(""),
	}}, nil, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}},
		OnToolResult:  func(tools.ToolResultEvent) { panic("hook bug") },
	}, request("s"))
	var kinds []string
	for _, f := range out {
		k := f.GetType().String()
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			k += " " + f.GetToolCallId() + " " + string(tools.KindOf(f))
		}
		kinds = append(kinds, k)
	}
	// c2 had its result already: it is sent, once, before the streams close.
	want := []string{"TOOL_CALL", "TOOL_CALL", "TOOL_RESULT c1 ", "TOOL_RESULT c2 ", "ERROR", "END"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("got %q, want %q", kinds, want)
	}
}

// TestLoop_RepeatedCallID: a response repeating a call id does not stall
// the loop: the repeat is dropped.
func TestLoop_RepeatedCallID(t *testing.T) {
	script := [][]*messages.Frame{
		{
			messages.ToolCall("", "c1", "weather", raw(`{"city":"Paris"}`)),
			messages.ToolCall("", "c1", "weather", raw(`{"city":"Oslo"}`)),
			messages.End(""),
		},
		{messages.Text("", "18"), messages.End("")},
	}
	out := sendLoop(t, script, nil, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}}}, request("s"))
	want := []string{
		`TOOL_CALL stream=s id=c1 name=weather payload={"city":"Paris"}`,
		`TOOL_RESULT stream=s id=c1 name=weather payload={"celsius":18,"city":"Paris"}`,
		`TEXT stream=s text="18"`,
		`END stream=s`,
	}
	if !slices.Equal(lines(out), want) {
		t.Fatalf("got %q", lines(out))
	}
}

// TestLoop_ErrorResultNotHTMLEscaped: "<", ">" and "&" reach the model as
// themselves in error results too (a handler's error, invalid arguments),
// as in successful ones: a compiler's or shell's message is read as it
// was written.
func TestLoop_ErrorResultNotHTMLEscaped(t *testing.T) {
	const text = "a < b && c > d"
	ok := tools.MustNewTyped(tools.Definition{Name: "ok"},
		func(context.Context, struct{}) (string, error) { return text, nil })
	fail := tools.MustNewTyped(tools.Definition{Name: "fail"},
		func(context.Context, struct{}) (string, error) { return "", errors.New(text) })
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c_ok", Name: "ok"}, {ID: "c_fail", Name: "fail"},
			{ID: "c_bad", Name: "ok", Arguments: `{"` + text + `":1}`}}},
		{Text: "done"},
	}}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{ok, fail}},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), loop)
	send(t, conn, messages.RawParam("s1", models.ParamMessages, models.EncodeMessages([]models.Message{models.UserMessage("Go.")})),
		messages.End("s1"))
	frames, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]*messages.Frame{}
	for _, f := range frames {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			results[f.GetToolCallId()] = f
		}
	}
	for id, kind := range map[string]tools.FailureKind{"c_ok": "", "c_fail": tools.FailureHandler, "c_bad": tools.FailureInvalidArguments} {
		f := results[id]
		if f == nil {
			t.Fatalf("no result for %s in %q", id, lines(frames))
		}
		if tools.KindOf(f) != kind || !strings.Contains(string(f.GetPayload()), text) {
			t.Errorf("%s: result %s (%q), want %q as written, of kind %q", id, f.GetPayload(), tools.KindOf(f), text, kind)
		}
	}
}
