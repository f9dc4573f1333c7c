package agent_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/tools"
)

// TestApprovalDeadline_PassedBeforeResume: without a Store, a deadline
// that passes before Resume lets the conversation go on in the loop; a
// later Resume answers at once with how it ended (the held call denied by
// the deadline, the decision ignored), not after waiting for ctx. The
// clock is synctest's: any wait would show as time passing.
func TestApprovalDeadline_PassedBeforeResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		l := newLauncher()
		a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()},
			Approval: &tools.ApprovalOptions{Deadline: time.Hour}})
		ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
		defer cancel()
		_, err := a.Run(ctx, "s1", ask)
		waiting(t, err, "c2")
		time.Sleep(time.Hour + time.Minute) // the fake clock passes the deadline
		synctest.Wait()                     // and the loop has gone on with nobody reading
		start := time.Now()
		ans, err := a.Resume(ctx, "s1", ask, agent.Approve("c2"))
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Resume waited %v", waited)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := resultOf(t, ans, "c2")
		if ans.Text != "Done." || r.FailureKind != string(tools.FailureDenied) || !strings.Contains(string(r.Content), "no approval came within 1h0m0s") ||
			l.runs.Load() != 0 {
			t.Fatalf("answer %q, result %+v, %d launches", ans.Text, r, l.runs.Load())
		}
		if r := resultOf(t, ans, "c1"); r.IsError {
			t.Fatalf("echo result %+v", r)
		}
	})
}
