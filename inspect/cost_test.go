package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// The cost of observing: the conversation of the benchmarks' figure 7
// (three tool calls, one per response, then the answer), each run on a
// stream of its own, played on a runtime with and without an inspector.

var costTools = []string{"alpha", "beta", "gamma"}

const costAnswer = "all three done"

type nIn struct {
	N int `json:"n"`
}

type okOut struct {
	OK bool `json:"ok"`
}

// costRig plays the conversation on a loop of its own runtime.
type costRig struct {
	conn    *actors.Conn
	request json.RawMessage
	runs    int
}

// newCostRig starts the loop, observed by in when it is not nil.
func newCostRig(t testing.TB, rt *actors.Runtime, in *inspect.Inspector) *costRig {
	t.Helper()
	var turns []scripted.Turn
	for i, name := range costTools {
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "call_" + strconv.Itoa(i+1), Name: name, Arguments: fmt.Sprintf(`{"n":%d}`, i+1)}}})
	}
	model := scripted.MustNew(scripted.Script{Select: scripted.BySequence, Repeat: true,
		Turns: append(turns, scripted.Turn{Text: costAnswer})}, &scripted.Options{MaxRecorded: -1}).Spec("model")
	var toolset []*tools.Tool
	for _, name := range costTools {
		toolset = append(toolset, tools.MustNewTyped(tools.Definition{Name: name, Description: "no-op " + name, Sync: true},
			func(context.Context, nIn) (okOut, error) { return okOut{OK: true}, nil }))
	}
	opts := &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: toolset}, MaxIterations: 10}
	if in != nil {
		model = in.Model(model)
		opts.OnToolResult = in.OnToolResult
	}
	loop, err := tools.NewLoop(model, opts)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rt.Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	return &costRig{conn: conn, request: models.EncodeMessages([]models.Message{models.UserMessage("go")})}
}

// run plays one conversation to its answer.
func (r *costRig) run(t testing.TB) {
	r.runs++
	id := "run-" + strconv.Itoa(r.runs)
	if err := r.conn.SendAll(messages.RawParam(id, models.ParamMessages, r.request), messages.End(id)); err != nil {
		t.Fatal(err)
	}
	frames, err := r.conn.RecvStream(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	text, results := "", 0
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			text += f.GetText()
		case messages.FrameType_TOOL_RESULT:
			results++
		}
	}
	if text != costAnswer || results != len(costTools) {
		t.Fatalf("run %s: %d results, text %q", id, results, text)
	}
}

// mallocs is the number of heap allocations made while run ran: exact,
// where testing.AllocsPerRun rounds its average down.
func mallocs(run func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// median is the middle of counts (sorted in place).
func median(counts []uint64) uint64 {
	slices.Sort(counts)
	return counts[len(counts)/2]
}

// mean is the average of counts.
func mean(counts []uint64) float64 {
	var sum uint64
	for _, c := range counts {
		sum += c
	}
	return float64(sum) / float64(len(counts))
}

// The inspector's hooks on the hot path (the model adapter's frames, the
// tool results) allocate nothing per run once its session list is full:
// a forgotten session's buffers serve the next one. A run's allocations
// are counted exactly, on one P (as testing.AllocsPerRun does), the runs
// with and without the inspector taken in turns; the typical run's (the
// median) with the inspector must be no more than without it. The
// amortized growth of its maps and lists, which a few runs pay for, and
// the allocations of the runtime's own goroutines, which fall in a few
// runs, do not move the median; an allocation that most runs make does.
// Under the race detector, which allocates on its own, the runs are
// played and observed, and their allocations are not checked.
func TestCost_AllocationsPerRun(t *testing.T) {
	if testing.Short() {
		t.Skip("300 conversations twice: run without -short")
	}
	rt := actorstest.NewRuntime(t, nil) // one for both: its goroutines are started on demand
	bare := newCostRig(t, rt, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	observed := newCostRig(t, rt, in)

	for range inspect.DefaultMaxSessions + 20 { // fills the session list
		bare.run(t)
		observed.run(t)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const runs = 301
	without, with := make([]uint64, runs), make([]uint64, runs)
	for i := range runs {
		without[i] = mallocs(func() { bare.run(t) })
		with[i] = mallocs(func() { observed.run(t) })
	}
	t.Logf("allocations per run: %.2f on average without the inspector, %.2f with it", mean(without), mean(with))
	if m, w := median(with), median(without); m > w && !raceDetector {
		t.Fatalf("the inspector adds %d allocations to a typical run (%d vs %d; on average %.2f vs %.2f), want none", m-w, m, w, mean(with), mean(without))
	}
	// It did observe the runs.
	snap := in.Snapshot("")
	if len(snap.Sessions) != inspect.DefaultMaxSessions {
		t.Fatalf("%d sessions shown, want the newest %d", len(snap.Sessions), inspect.DefaultMaxSessions)
	}
	for _, name := range costTools {
		if tf := tool(snap, name); tf.Calls != observed.runs || tf.P50 == "" {
			t.Fatalf("%s: %+v, want %d calls with latencies", name, tf, observed.runs)
		}
	}
}

// fullInspector is an inspector that observed runs of the conversation
// past its session list's bound, and the rig that played them.
func fullInspector(b *testing.B) (*inspect.Inspector, *costRig) {
	rt := actorstest.NewRuntime(b, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(in.Close)
	r := newCostRig(b, rt, in)
	for range inspect.DefaultMaxSessions + 20 {
		r.run(b)
	}
	return in, r
}

// BenchmarkRender is what one event of a page's stream costs (the HTML
// fragments) with the session list full and the newest session selected.
func BenchmarkRender(b *testing.B) {
	in, r := fullInspector(b)
	query := "?session=run-" + strconv.Itoa(r.runs)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inspect.RenderView(in, query); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot is the snapshot the page's stream renders its view
// from, with the session list full and none selected (as the event
// stream of figure 7's inspector row asks for it).
func BenchmarkSnapshot(b *testing.B) {
	in, _ := fullInspector(b)
	b.ReportAllocs()
	for b.Loop() {
		in.Snapshot("")
	}
}

// Calls of one tool made together (one response) are each timed: the
// latencies are sampled only past timedPerTick calls of a tool per tick
// of the coarse clock.
func TestCost_CallsMadeTogetherAreTimed(t *testing.T) {
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"x":1}`}, {ID: "c2", Name: "echo", Arguments: `{"x":2}`},
			{ID: "c3", Name: "echo", Arguments: `{"x":3}`}}},
		{Text: "done"},
	}}, nil).Spec("model")
	r := newRig(t, nil, model)
	r.converse(t, "s1", "echo thrice")
	if echo := tool(r.state(t, ""), "echo"); echo.Calls != 3 || echo.Timed != 3 {
		t.Fatalf("echo figures %+v, want 3 calls, all timed", echo)
	}
}
