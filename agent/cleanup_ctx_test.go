package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// tenantKey is the key of a request-scoped value a host's Store reads.
type tenantKey struct{}

// deleteSeen is what a Store saw of the ctx of one DeleteEvents.
type deleteSeen struct {
	name   string
	tenant any
	err    error // the ctx's error as the delete began
}

// tenantStore is a Store that tells of each DeleteEvents the tenant its
// ctx carries, as a host's multi-tenant Store would read it.
type tenantStore struct {
	durability.Store
	deletes chan deleteSeen
}

func (s *tenantStore) DeleteEvents(ctx context.Context, name string, through uint64) error {
	s.deletes <- deleteSeen{name: name, tenant: ctx.Value(tenantKey{}), err: ctx.Err()}
	return s.Store.DeleteEvents(ctx, name, through)
}

// TestAsTool_DelegationCleanupKeepsCallValues: the clean-up of a
// delegation (the delete of its session from the Store, once it has
// returned) is work of the call that ran it: the Store is given the
// call's ctx values (a tenant, a trace parent), without its cancel and
// bounded by CancelGrace, whether the delegation answered or its call
// was cancelled mid-way. Before, the delete ran on a ctx of its own and
// a Store that reads the tenant from ctx deleted in no tenant's name.
func TestAsTool_DelegationCleanupKeepsCallValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
	}{{"answered", false}, {"cancelled", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memstore.New(nil)
			t.Cleanup(func() { mem.Close() })
			store := &tenantStore{Store: mem, deletes: make(chan deleteSeen, 4)}
			rt := actorstest.NewRuntime(t, nil)
			started := make(chan struct{})
			hold := tools.MustNewTyped(tools.Definition{Name: "hold", Description: "Hold until cancelled.", Capabilities: []string{"read"}},
				func(ctx context.Context, _ struct{}) (string, error) {
					close(started)
					<-ctx.Done()
					return "", context.Cause(ctx)
				})
			turns := []scripted.Turn{{Text: "written"}}
			if tc.cancel {
				turns = []scripted.Turn{{ToolCalls: []scripted.ToolCall{call("h1", "hold", `{}`)}}, {Text: "held"}}
			}
			writer := newAgent(t, rt, model(t, turns...),
				&agent.Options{Name: "writer", Store: store, Tools: []*tools.Tool{hold}})
			tool, err := agent.AsTool(writer, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.WithValue(testCtx(t), tenantKey{}, "acme"))
			defer cancel()
			if tc.cancel {
				go func() {
					<-started
					cancel()
				}()
			}
			_, err = tool.Definition().Handler(ctx, json.RawMessage(`{"task":"Write it."}`))
			if tc.cancel != (err != nil) {
				t.Fatalf("delegation returned %v, cancelled %v", err, tc.cancel)
			}
			select {
			case seen := <-store.deletes:
				if seen.tenant != "acme" {
					t.Errorf("the delete of delegation session %q saw tenant %v, want the call's %q", seen.name, seen.tenant, "acme")
				}
				if seen.err != nil {
					t.Errorf("the delete of delegation session %q began on a ctx already ended: %v", seen.name, seen.err)
				}
			case <-testCtx(t).Done():
				t.Fatal("the delegation's session was never deleted")
			}
		})
	}
}
