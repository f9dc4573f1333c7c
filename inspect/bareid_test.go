package inspect_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/inspect"
)

// TestSelect_BareIDWithTwoAgents: once a second agent's sessions are
// kept, sessions are listed by their agents' keys; a bare session id
// that only one of them has still selects it, and one that several
// agents' sessions share gets an answer naming them (409 from the API)
// rather than an empty selection.
func TestSelect_BareIDWithTwoAgents(t *testing.T) {
	_, in, store := inspectedStore(t, &inspect.Options{AllowRemote: true})
	for _, key := range []string{agent.SessionKey("alice", "only-alice"), agent.SessionKey("alice", "shared"), agent.SessionKey("bob", "shared")} {
		if err := store.PersistSnapshot(testCtx(t), key, 1, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if d := in.Snapshot("only-alice").Session; d == nil || d.ID != agent.SessionKey("alice", "only-alice") {
		t.Errorf("the bare id only alice's session has selected %+v, want alice's session (listed %q)", d, listedIDs(in))
	}
	if d := in.Snapshot("shared").Session; d != nil {
		t.Errorf("the id two agents' sessions share selected %q", d.ID)
	}
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/state?session=shared", nil))
	if body := rec.Body.String(); rec.Code != http.StatusConflict || !strings.Contains(body, "alice/shared") || !strings.Contains(body, "bob/shared") {
		t.Errorf("state of the shared id: %d %q, want 409 naming both sessions' keys", rec.Code, body)
	}
	rec = httptest.NewRecorder()
	in.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/state?session=only-alice", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "alice/only-alice") {
		t.Errorf("state of alice's bare id: %d %q", rec.Code, rec.Body.String())
	}
}

// TestSelect_BareIDOnlyOfAgentKeys: a bare id selects a durability
// position listed alone by the id in its name only when the name is an
// agent's session key (as agent.SessionKey writes them); a name that is
// not one ("%zz/b": SessionKey writes a '%' of a name "%25"; "/c": no
// agent's name is empty) is selected by its full name alone.
func TestSelect_BareIDOnlyOfAgentKeys(t *testing.T) {
	_, in, store := inspectedStore(t, nil)
	for _, name := range []string{"%zz/b", "/c", agent.SessionKey("a/x", "d")} {
		if err := store.PersistSnapshot(testCtx(t), name, 1, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, bare := range []string{"b", "c"} {
		if d := in.Snapshot(bare).Session; d != nil {
			t.Errorf("the bare id %q selected %q, a name no agent writes (listed %q)", bare, d.ID, listedIDs(in))
		}
	}
	for _, name := range []string{"%zz/b", "/c"} {
		if d := in.Snapshot(name).Session; d == nil || d.ID != name {
			t.Errorf("the full name %q selected %+v", name, d)
		}
	}
	if d := in.Snapshot("d").Session; d == nil || d.ID != agent.SessionKey("a/x", "d") {
		t.Errorf("the bare id of agent a/x's session selected %+v", d)
	}
}
