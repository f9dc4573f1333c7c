package scripted_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestModel_StreamedTurnAllocations: the frames of a turn are made in one
// allocation however many there are, so a call streamed in 64 chunks and
// text in 32 deltas cost the adapter no more allocations than 2 chunks
// and 1 delta, and a whole turn takes a few.
func TestModel_StreamedTurnAllocations(t *testing.T) {
	args := `{"text":"` + strings.Repeat("x", 500) + `"}`
	allocs := func(chunks, deltas int) float64 {
		m, err := scripted.New(scripted.Script{Repeat: true, Turns: []scripted.Turn{{
			Text: strings.Repeat("y", 64), Deltas: deltas,
			ToolCalls: []scripted.ToolCall{{ID: "c", Name: "f", Arguments: args, Split: chunks}},
		}}}, &scripted.Options{MaxRecorded: -1})
		if err != nil {
			t.Fatal(err)
		}
		l := m.Spec("model").New()
		r := actorstest.Recorder{Emitted: make([]*messages.Frame, 0, 128)}
		end := messages.End("s")
		n := testing.AllocsPerRun(100, func() {
			r.Emitted = r.Emitted[:0]
			if err := r.Deliver(l, end); err != nil {
				t.Fatal(err)
			}
		})
		if want := deltas + 1 + chunks + 1 + 2; len(r.Emitted) != want {
			t.Fatalf("%d chunks, %d deltas: %d frames, want %d", chunks, deltas, len(r.Emitted), want)
		}
		return n
	}
	few, many := allocs(2, 1), allocs(64, 32)
	t.Logf("allocations per turn: %.0f with 2 chunks and 1 delta, %.0f with 64 chunks and 32 deltas", few, many)
	if raceDetector {
		return
	}
	if many != few || few > 3 {
		t.Errorf("allocations per turn: %.0f with 2 chunks and 1 delta, %.0f with 64 chunks and 32 deltas; want the same, at most 3", few, many)
	}
}

// TestModel_UnrecordedRequestsReused: a model that records no requests
// gives each one back to its tracker once answered, so a request (its
// PARAMs gathered) costs the adapter the turn's frames alone, one
// allocation; a recording model keeps every request it records intact
// (TestModel_SequenceRepeatsAndRecordsBoundedHistory).
func TestModel_UnrecordedRequestsReused(t *testing.T) {
	m, err := scripted.New(scripted.Script{Repeat: true, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c", Name: "f", Arguments: `{"n":1}`}}},
		{Text: "done"},
	}}, &scripted.Options{MaxRecorded: -1})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Spec("model").New()
	r := actorstest.Recorder{Emitted: make([]*messages.Frame, 0, 8)}
	tools := messages.RawParam("s", models.ParamTools, json.RawMessage(`[]`))
	msgs := messages.RawParam("s", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"hi"}]`))
	end := messages.End("s")
	n := testing.AllocsPerRun(100, func() {
		r.Emitted = r.Emitted[:0]
		for _, f := range []*messages.Frame{tools, msgs, end} {
			if err := r.Deliver(l, f); err != nil {
				t.Fatal(err)
			}
		}
	})
	if len(r.Emitted) == 0 || r.Emitted[len(r.Emitted)-1].GetType() != messages.FrameType_END {
		t.Fatalf("the request was not answered: %d frames", len(r.Emitted))
	}
	t.Logf("allocations per request: %.0f", n)
	if n > 1 && !raceDetector {
		t.Errorf("allocations per request: %.0f, want 1 (the turn's frames)", n)
	}
}
