package cluster

import (
	"context"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/messages"
)

// RunIncarnation runs one incarnation of session id in rt on a claim of it
// in store, as a member's session actor does, and returns its state
// ("done", "failed", "moved", "retry"), its text or error, and its
// claim's epoch.
func RunIncarnation(ctx context.Context, rt *actors.Runtime, store *pgstore.Store, fn SessionFunc, id string, request ...*messages.Frame) (state, text string, epoch uint64) {
	var params []param
	for _, f := range request {
		params = append(params, param{Name: f.GetName(), Value: f.GetPayload()})
	}
	st, claim := runSession(ctx, rt, store, fn, id, params)
	if claim != nil {
		epoch = claim.Epoch()
	}
	if st.State == stateDone {
		return st.State, st.Text, epoch
	}
	return st.State, st.Error, epoch
}
