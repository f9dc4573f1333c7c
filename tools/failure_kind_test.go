package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/models/streaming"
	"github.com/polyweave/polyweave-go/tools"
)

// errorOf sends a request of msgs on stream and returns the ERROR frame
// that ends it (nil when it ends without one).
func errorOf(t *testing.T, conn *actors.Conn, stream, msgs string) *messages.Frame {
	t.Helper()
	send(t, conn, messages.RawParam(stream, models.ParamMessages, json.RawMessage(msgs)), messages.End(stream))
	got, err := conn.RecvStream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		if f.GetType() == messages.FrameType_ERROR {
			return f
		}
	}
	return nil
}

// TestLoop_RefusalsSayTheyArePermanent: the ERROR of a request that
// cannot succeed when sent again carries a failure kind that says so: a
// request conflicting with the stored session, messages that are not a
// list, a model failure the model marks permanent. A model failure that
// may heal carries none.
func TestLoop_RefusalsSayTheyArePermanent(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := newRuntime(t)
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "Hi."}}}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "durable"},
		Session:       &tools.SessionOptions{ID: "s", Store: store},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, loop)
	if f := errorOf(t, conn, "a", `[{"role":"user","content":"hi"}]`); f != nil {
		t.Fatalf("first request: %s", messages.Format(f))
	}
	if f := errorOf(t, conn, "b", `[{"role":"user","content":"other"}]`); f.GetMeta().GetFailureKind() != string(tools.FailureSessionConflict) {
		t.Errorf("a conflicting request: %s of kind %q, want %q", messages.Format(f), f.GetMeta().GetFailureKind(), tools.FailureSessionConflict)
	}

	for _, tc := range []struct {
		name string
		err  error
		msgs string
		kind string
	}{
		{"permanent model failure", models.Permanent(errors.New("HTTP 401: bad key")), `[]`, models.FailurePermanent},
		{"model failure", errors.New("HTTP 503: later"), `[]`, ""},
		{"messages not a list", nil, `"hi"`, models.FailurePermanent},
	} {
		failing := streaming.Spec("model", func(context.Context, *models.Request, func(*messages.Frame)) ([]*messages.Frame, error) {
			return nil, tc.err
		})
		loop, err := tools.NewLoop(failing, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: "plain"}})
		if err != nil {
			t.Fatal(err)
		}
		f := errorOf(t, start(t, rt, loop), "s", tc.msgs)
		if f == nil || f.GetMeta().GetFailureKind() != tc.kind {
			t.Errorf("%s: %v of kind %q, want kind %q", tc.name, messages.Format(f), f.GetMeta().GetFailureKind(), tc.kind)
		}
	}
}

// TestStages_RefuseAZeroInnerSpec: a loop, router or installer around a
// zero spec is refused when it is made, not when it starts; a nil Tool
// has no name rather than a panic.
func TestStages_RefuseAZeroInnerSpec(t *testing.T) {
	if _, err := tools.NewLoop(actors.Spec{}, nil); err == nil || !strings.Contains(err.Error(), "no New function") {
		t.Errorf("NewLoop: %v", err)
	}
	if _, err := tools.NewRouter(actors.Spec{}, nil); err == nil || !strings.Contains(err.Error(), "no New function") {
		t.Errorf("NewRouter: %v", err)
	}
	if _, err := tools.NewInstaller(actors.Spec{}, nil); err == nil || !strings.Contains(err.Error(), "no New function") {
		t.Errorf("NewInstaller: %v", err)
	}
	var nilTool *tools.Tool
	if name := nilTool.Name(); name != "" {
		t.Errorf("nil Tool's name %q", name)
	}
}

// TestNew_ArgumentsAreAnObject: a schema that is not an object, or whose
// type is not "object", is refused, and so is a typed tool whose input
// is not one; object schemas, with a list of types holding "object" or
// no type at all, and struct and map inputs are taken.
func TestNew_ArgumentsAreAnObject(t *testing.T) {
	for schema, ok := range map[string]bool{
		`{"type":"array"}`: false, `{"type":"string"}`: false, `true`: false, `{"type":["string","null"]}`: false,
		`{"type":"object"}`: true, `{"type":["object","null"]}`: true, `{}`: true, `{"properties":{"a":{"type":"string"}}}`: true,
	} {
		_, err := tools.New(tools.Definition{Name: "t", Schema: json.RawMessage(schema)})
		if (err == nil) != ok || !ok && (!errors.Is(err, tools.ErrInvalidDefinition) || !strings.Contains(err.Error(), "object")) {
			t.Errorf("schema %s: %v, want accepted %v", schema, err, ok)
		}
	}
	fn := func(context.Context, string) (string, error) { return "", nil }
	if _, err := tools.NewTyped(tools.Definition{Name: "s"}, fn); !errors.Is(err, tools.ErrInvalidDefinition) || !strings.Contains(err.Error(), "not a struct") {
		t.Errorf("string input: %v", err)
	}
	if _, err := tools.NewTyped(tools.Definition{Name: "l"}, func(context.Context, []int) (string, error) { return "", nil }); err == nil {
		t.Errorf("slice input taken")
	}
	if _, err := tools.NewTyped(tools.Definition{Name: "m"}, func(context.Context, map[string]int) (string, error) { return "", nil }); err != nil {
		t.Errorf("map input: %v", err)
	}
	if _, err := tools.NewTyped(tools.Definition{Name: "p"}, func(context.Context, *struct{ A int }) (string, error) { return "", nil }); err != nil {
		t.Errorf("pointer to struct input: %v", err)
	}
}
