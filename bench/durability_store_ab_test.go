package main

import "testing"

// TestPairedSides checks that both figures of a round come from the same
// run whichever side the harness measures first (it alternates), and
// that every round makes a run of its own.
func TestPairedSides(t *testing.T) {
	runs := 0
	on, off := pairedSides(func() [2]sample {
		runs++
		return [2]sample{{ns: float64(runs)}, {ns: float64(-runs)}}
	})
	for round := 1; round <= 6; round++ {
		var o, b sample
		if round%2 == 0 {
			b, o = off(), on()
		} else {
			o, b = on(), off()
		}
		if o.ns != float64(round) || b.ns != -float64(round) {
			t.Fatalf("round %d: on from run %v, off from run %v, want both from run %d", round, o.ns, -b.ns, round)
		}
	}
	if runs != 6 {
		t.Errorf("6 rounds made %d runs", runs)
	}
}
