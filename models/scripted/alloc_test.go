package scripted_test

import (
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
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
