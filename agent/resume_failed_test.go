package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// The tests of this file check that the rounds a resumed durable session
// rebuilds from the store keep which of their calls failed, and why.

// failedRoundsAgent is roundsAgent with a round 1 of two calls: c1
// echoes, c0 calls "slow", which times out.
func failedRoundsAgent(t *testing.T, rt *actors.Runtime, store durability.Store, started chan<- struct{}, echoes *atomic.Int64) (*agent.Agent, error) {
	t.Helper()
	m, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Checking.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`), call("c0", "slow", `{}`)}},
		{Text: "Holding.", ToolCalls: []scripted.ToolCall{call("c2", "hold", `{}`)}},
		{Text: "All done."},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := tools.MustNew(tools.Definition{Name: "slow", Timeout: time.Millisecond,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done() // its timeout ends it
			return nil, ctx.Err()
		}})
	return agent.New(rt, m.Spec("model"), &agent.Options{Name: "rounds", Store: store,
		Tools: []*tools.Tool{echo(echoes), slow, holdTool(started)}})
}

// resumeFailedRounds stops a process during round 2 of failedRoundsAgent's
// session (stopDuringHold), lets change alter the store it leaves (nil:
// none), and returns the answer of a Run in a new process that resumes
// the session, and that of a Run of the ended session after it.
func resumeFailedRounds(t *testing.T, change func(durability.Store)) (resumed, ended *models.Answer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessions.db")
	var echoes atomic.Int64
	stopDuringHold(t, path, func(rt *actors.Runtime, store durability.Store, started chan<- struct{}) (*agent.Agent, error) {
		return failedRoundsAgent(t, rt, store, started, &echoes)
	})
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if change != nil {
		change(store)
	}
	rt := actorstest.NewRuntime(t, nil)
	a, err := failedRoundsAgent(t, rt, store, make(chan struct{}, 1), &echoes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	if resumed, err = a.Run(testCtx(t), "session-1", ask); err != nil {
		t.Fatal(err)
	}
	if resumed.Text != "All done." || echoes.Load() != 1 {
		t.Fatalf("answer %q, echo ran %d times", resumed.Text, echoes.Load())
	}
	if ended, err = a.Run(testCtx(t), "session-1", ask); err != nil || !ended.Answered {
		t.Fatalf("ended session: %+v, %v", ended, err)
	}
	return resumed, ended
}

// TestRun_ResumedRoundsKeepFailedCalls: a process stopped during round
// 2, after c0 of round 1 timed out; the answer of the Run that resumes
// the session in a new process, and of a Run of the ended session, has
// c0 of the rebuilt round 1 as the error result it was, with its failure
// kind (c1 is not one), and FailedCalls counts it.
func TestRun_ResumedRoundsKeepFailedCalls(t *testing.T) {
	resumed, ended := resumeFailedRounds(t, nil)
	wantRounds(t, "resumed Run", resumed, `"Checking.": c1 echo={"echo":"hi"} c0 slow=[timeout]; "Holding.": c2 hold=[interrupted]`)
	wantRounds(t, "ended session", ended, `"Checking.": c1 echo={"echo":"hi"} c0 slow=[timeout]; "Holding.": c2 hold=[interrupted]`)
	for what, ans := range map[string]*models.Answer{"resumed Run": resumed, "ended session": ended} {
		if ok, failed := ans.Rounds[0].Results[0], ans.Rounds[0].Results[1]; ok.IsError || !failed.IsError || ans.FailedCalls() != 2 {
			t.Errorf("%s: round 1's results are errors: c1 %v, c0 %v; %d failed calls, want c0 and c2", what, ok.IsError, failed.IsError, ans.FailedCalls())
		}
	}
}

// TestRun_ResumesSessionStoredWithoutResultMarks: a session whose
// snapshot has no result marks, as versions before them stored it,
// resumes: the rebuilt round has its results' content, none of them
// marked failed.
func TestRun_ResumesSessionStoredWithoutResultMarks(t *testing.T) {
	resumed, ended := resumeFailedRounds(t, func(store durability.Store) {
		ctx, key := testCtx(t), agent.SessionKey("rounds", "session-1")
		st, ok, err := tools.ReadSession(ctx, store, key)
		if err != nil || !ok || len(st.GetResultMarks()) == 0 {
			t.Fatalf("stored session: %v, %v, %v; want one with result marks", st, ok, err)
		}
		st.ResultMarks = nil
		packed, err := anypb.New(st)
		if err != nil {
			t.Fatal(err)
		}
		data, err := proto.Marshal(packed)
		if err != nil {
			t.Fatal(err)
		}
		// Events before a snapshot's index are not read.
		if err := store.PersistSnapshot(ctx, key, st.GetSteps(), data); err != nil {
			t.Fatal(err)
		}
	})
	for what, ans := range map[string]*models.Answer{"resumed Run": resumed, "ended session": ended} {
		c0 := ans.Rounds[0].Results[1]
		if c0.IsError || c0.FailureKind != "" || len(c0.Content) == 0 {
			t.Errorf("%s: c0 of the rebuilt round %+v, want its content alone", what, c0)
		}
	}
	wantRounds(t, "resumed Run", resumed, `"Checking.": c1 echo={"echo":"hi"} c0 slow=`+string(resumed.Rounds[0].Results[1].Content)+`; "Holding.": c2 hold=[interrupted]`)
}
