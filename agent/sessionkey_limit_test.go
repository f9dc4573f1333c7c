package agent_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/tools"
)

// TestStore_SessionKeysFitEveryStore: with a Store, the longest session
// id an agent of a long name takes (its '/' written %2F in a key) makes
// a key, and with tools.ApprovalStoreSuffix the key of its calls held
// for approval, that memstore, boltstore and pgstore all take: a session
// of that id waits for approval and is resumed to its answer on each.
// An id one byte longer is refused before anything is sent, with
// ErrInvalidSessionID saying its length, the name's and the limit.
func TestStore_SessionKeysFitEveryStore(t *testing.T) {
	for _, s := range []struct {
		name string
		open func(t *testing.T) durability.Store
	}{
		{"memstore", func(t *testing.T) durability.Store {
			store := memstore.New(nil)
			t.Cleanup(func() { store.Close() })
			return store
		}},
		{"boltstore", openBolt},
		{"pgstore", openPostgres},
	} {
		t.Run(s.name, func(t *testing.T) {
			store := s.open(t)
			rt := actorstest.NewRuntime(t, nil)
			name := strings.Repeat("team/", 40) // 200 bytes, 280 in a key
			m := approvalScript(t)
			a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: name, Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
				Approval: &tools.ApprovalOptions{}, Store: store})
			longest := durability.MaxNameLen - len(agent.SessionKey(name, "")) - len(tools.ApprovalStoreSuffix)
			id := strings.Repeat("é", longest/2) + strings.Repeat("s", longest%2)
			_, err := a.Run(testCtx(t), id, ask)
			waiting(t, err, "c2")
			if pending, err := tools.ReadApprovals(store, a.SessionKey(id)); err != nil || len(pending) != 1 {
				t.Fatalf("the held calls of an id of %d bytes: %+v, %v; want the one held", len(id), pending, err)
			}
			if ans, err := a.Resume(testCtx(t), id, ask, agent.Approve("c2")); err != nil || ans.Text != "Done." {
				t.Fatalf("Resume of an id of %d bytes: %v, %+v", len(id), err, ans)
			}
			asked := len(m.Requests())
			long := id + "s"
			_, err = a.Run(testCtx(t), long, ask)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if !errors.Is(err, agent.ErrInvalidSessionID) || len(msg) > 600 {
				t.Fatalf("an id of %d bytes: %v, want ErrInvalidSessionID, short", len(long), err)
			}
			for _, says := range []int{len(long), len(name), durability.MaxNameLen} {
				if !strings.Contains(msg, strconv.Itoa(says)) {
					t.Errorf("an id of %d bytes: %q does not say %d", len(long), msg, says)
				}
			}
			if n := len(m.Requests()); n != asked {
				t.Errorf("the model got %d requests for the refused id", n-asked)
			}
		})
	}
}

// openPostgres starts a throwaway PostgreSQL server and opens a store on
// it, both stopped when the test ends.
func openPostgres(t *testing.T) durability.Store {
	t.Helper()
	srv, err := pgtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	store, err := pgstore.Open(t.Context(), srv.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
