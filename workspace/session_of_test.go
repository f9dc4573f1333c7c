package workspace_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
)

// The journal files a write under the session an agent's stream id
// names, '#' and '%' in it and a later attempt included, so the host
// finds it by the session's own id.
func TestJournal_SessionOfAgentStreams(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, t.TempDir(), memstore.New(nil))
	jt := startJournal(t, rt, j)
	for i, session := range []string{"a#b", "100%", "c"} {
		jt.write(agent.StreamID(session, 1), "w1", "f"+string(rune('0'+i))+".txt", "1")
		jt.write(agent.StreamID(session, 2), "w2", "f"+string(rune('0'+i))+".txt", "2")
		changes, err := j.Changes(undoCtx(t), session)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 2 || changes[0].CallID != "w1" || changes[1].CallID != "w2" {
			t.Errorf("changes of session %q: %+v, want the writes of both attempts", session, changes)
		}
	}
}
