package actors

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_ResumeDropsRestOfFailedCall: a call is the frames of its
// stream up to the caller's END. The Resume answers the call whose frame
// failed the duplex; the call's later frames, up to its END, are the
// answered call's: dropped, not a new call for the Logic to answer again.
func TestShell_ResumeDropsRestOfFailedCall(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: resumeAll()})
	var starts atomic.Int32
	conn, err := rt.Start(failingChild(&starts, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*messages.Frame{messages.Text("f", "fail"), messages.Text("f", "more"), messages.End("f"), messages.Text("g", "other")} {
		if err := conn.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	got := recvUntil(t, conn, "g", "END")
	var onF []string
	for _, g := range got {
		if strings.HasPrefix(g, "f:") {
			onF = append(onF, g)
		}
	}
	if want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END"}; !slices.Equal(onF, want) {
		t.Errorf("stream f got %q, want one answer %q", onF, want)
	}
}
