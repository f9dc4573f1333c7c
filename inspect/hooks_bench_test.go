package inspect

import (
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// hookRun is the frames one run of the benchmarks' conversation shows the
// inspector's hooks: a request, three responses each calling one tool,
// the three results, and the answer.
type hookRun struct {
	params, ends, responses [][]*messages.Frame
	results                 []tools.ToolResultEvent
}

func newHookRun(tb testing.TB, stream string) hookRun {
	var r hookRun
	request := models.EncodeMessages([]models.Message{models.UserMessage("go")})
	for turn := range 4 {
		r.params = append(r.params, []*messages.Frame{messages.RawParam(stream, models.ParamMessages, request)})
		r.ends = append(r.ends, []*messages.Frame{messages.End(stream)})
		if turn == 3 {
			r.responses = append(r.responses, []*messages.Frame{messages.Text(stream, "done"), messages.End(stream)})
			break
		}
		id, name := "call_"+strconv.Itoa(turn+1), costToolNames[turn]
		call := messages.ToolCall(stream, id, name, []byte(`{"n":1}`))
		r.responses = append(r.responses, []*messages.Frame{call, messages.End(stream)})
		result, err := messages.ToolResult(stream, id, name, map[string]bool{"ok": true})
		if err != nil {
			tb.Fatal(err)
		}
		r.results = append(r.results, tools.ToolResultEvent{StreamID: stream, Iteration: turn + 1, Call: call, Result: result})
	}
	return r
}

var costToolNames = []string{"alpha", "beta", "gamma"}

// play shows the run to o and in as the adapter's actor and the loop
// would: per turn, the request's PARAM, its END with the response, then
// the tool result.
func (r *hookRun) play(in *Inspector, o *modelObserver) {
	for turn := range r.params {
		for _, f := range r.params[turn] {
			o.request(f)
			o.flush()
		}
		for _, f := range r.ends[turn] {
			o.request(f)
		}
		for _, f := range r.responses[turn] {
			o.response(f)
		}
		o.flush()
		if turn < len(r.results) {
			in.OnToolResult(r.results[turn])
		}
	}
}

// BenchmarkHooks is what the inspector's hooks on the hot path cost per
// run of the benchmarks' conversation (one goroutine, no actors: the
// bookkeeping alone), each run on a stream of its own past the session
// list's bound.
func BenchmarkHooks(b *testing.B) {
	in, o := newObserved(b)
	const streams = 4 * DefaultMaxSessions
	runs := make([]hookRun, streams)
	for i := range runs {
		runs[i] = newHookRun(b, "run-"+strconv.Itoa(i))
	}
	for i := range runs {
		runs[i].play(in, o)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		runs[n%streams].play(in, o)
		n++
	}
}

// BenchmarkHooksOneSession is BenchmarkHooks with every run on the same
// stream: no session made, looked up or forgotten per run. The
// difference between the two is what a new session costs.
func BenchmarkHooksOneSession(b *testing.B) {
	in, o := newObserved(b)
	run := newHookRun(b, "run-0")
	run.play(in, o)
	b.ReportAllocs()
	for b.Loop() {
		run.play(in, o)
	}
}
