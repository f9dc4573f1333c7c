package tools

import (
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// A router remembers the streams a CANCEL of the whole stream or an ABORT
// went through for until inner ends them. A CANCEL that comes after inner
// ended its stream (the consumer's cancel racing the model's END) gets no
// END to remove it: such entries are bounded, the oldest going first,
// while one that an END does end goes at once.
func TestRouter_CutStreamsAreBounded(t *testing.T) {
	r := newRouterLogic(nil, BreakerOptions{})
	c := &inlineCtx{}
	r.Start(c)
	for i := range cutLimit + 50 {
		r.Request(c, messages.Cancel(fmt.Sprintf("late-%d", i), ""))
	}
	if len(r.cut) != cutLimit || len(r.cutOrder) != cutLimit {
		t.Fatalf("%d streams remembered (%d in order) after %d late cancels, want %d", len(r.cut), len(r.cutOrder), cutLimit+50, cutLimit)
	}
	if _, ok := r.cut["late-0"]; ok {
		t.Fatal("the oldest late cancel is still remembered")
	}
	if _, ok := r.cut[fmt.Sprintf("late-%d", cutLimit+49)]; !ok {
		t.Fatal("the newest late cancel is forgotten")
	}
	// A stream inner does end is forgotten at its END, order and all.
	r.Request(c, messages.Abort("s"))
	r.Response(c, messages.End("s"))
	if _, ok := r.cut["s"]; ok || len(r.cutOrder) != len(r.cut) {
		t.Fatalf("after s's END: remembered %v, %d in order for %d streams", ok, len(r.cutOrder), len(r.cut))
	}
}
