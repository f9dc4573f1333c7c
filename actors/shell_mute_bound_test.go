package actors

import (
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_MutedCallsBounded: a Logic that never ends the calls a
// Resume answered (it knew nothing of them: each failed it before it
// took it in) leaves them muted. A long-lived duplex keeps muteMax of
// each kind at most, the latest: those answered alone among their
// stream's calls, and those answered with their stream.
func TestShell_MutedCallsBounded(t *testing.T) {
	s := &shell{}
	n := muteMax + 10
	for i := range n {
		id := "s" + strconv.Itoa(i)
		s.mute(id, "c", true)
		s.mute("t"+strconv.Itoa(i), "c", false)
	}
	for _, kind := range []string{"s", "t"} {
		muted := 0
		for i := range n {
			id := kind + strconv.Itoa(i)
			// Not an END, which would end the mute: the test only looks.
			if s.dropEmit(messages.RawToolResult(id, "c", "tool", []byte(`"late"`))) {
				muted++
			} else if i >= n-muteMax {
				t.Errorf("call on %s not muted: the latest %d stay muted", id, muteMax)
			}
		}
		if muted != muteMax {
			t.Errorf("%d calls on %s streams muted, want at most %d, the latest", muted, kind, muteMax)
		}
	}
}
