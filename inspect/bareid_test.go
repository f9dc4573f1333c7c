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
