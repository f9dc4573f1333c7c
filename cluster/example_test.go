package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// A member of a one-member cluster runs a session. With more members,
// each process lists every member's health-check address in Automanaged
// and any of them can Run any session: it runs on the member the cluster
// places it on, and moves (resuming from the store) when that member
// dies.
func Example() {
	ctx := context.Background()
	// dsn is the PostgreSQL server every member shares, e.g.
	// "postgres://polyweave@db.internal/polyweave".
	store, err := pgstore.Open(ctx, dsn, &pgstore.Options{Schema: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	add := tools.MustNew(tools.Definition{Name: "add",
		Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct{ A, B float64 }
			err := json.Unmarshal(args, &in)
			return in.A + in.B, err
		}})
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":2,"b":3}`}}},
		{Text: "2 + 3 = 5."},
	}}, nil)

	// The member answers health checks on a free port, bound now.
	health, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	member, err := cluster.Start(&cluster.Options{
		Address:  "127.0.0.1:0",
		Provider: cluster.Automanaged(0, []string{health.Addr().String()}, time.Second, cluster.HealthListener(health)),
		Store:    store,
		// Every member builds a session's loop the same way.
		Session: func(id string) (actors.Spec, *tools.LoopOptions, error) {
			return model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{add}}}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer member.Close(ctx)

	res, err := member.Run(ctx, "session-42", messages.RawParam("", models.ParamMessages,
		json.RawMessage(`[{"role":"user","content":"What is 2 + 3?"}]`)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output: 2 + 3 = 5.
}

// Members on several machines listen beyond loopback (AllowRemote). An
// automanaged member answers health checks on the host of its address
// unless HealthHost names another: here, its address on a management
// network, where every member's health checks are polled.
func ExampleHealthHost() {
	opts := &cluster.Options{
		Address:     "10.0.0.5:8090",
		AllowRemote: true,
		Provider: cluster.Automanaged(6330, []string{"10.1.0.5:6330", "10.1.0.6:6330"}, time.Second,
			cluster.HealthHost("10.1.0.5")),
	}
	_ = opts // with Store and Session set: cluster.Start(opts)
}
