package inspect_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/inspect"
)

// TestPage_AmbiguousBareIDNamesTheSessions: like /api/state, the page
// asked for a bare session id that several agents' sessions have says
// so and names them (links to each), rather than showing no session as
// if none had the id.
func TestPage_AmbiguousBareIDNamesTheSessions(t *testing.T) {
	_, in, store := inspectedStore(t, &inspect.Options{AllowRemote: true})
	for _, key := range []string{agent.SessionKey("alice", "shared"), agent.SessionKey("bob", "shared")} {
		if err := store.PersistSnapshot(testCtx(t), key, 1, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?session=shared", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusConflict || !strings.Contains(body, "<b>shared</b> is ambiguous") {
		t.Errorf("page of the shared id: %d, want 409 saying the id is ambiguous:\n%s", rec.Code, body)
	}
	// The script follows the events of the session the body names: the
	// id asked for, so that the events name the sessions too.
	if !strings.Contains(body, `<body data-session="shared">`) {
		t.Errorf("the page's body does not carry the id asked for, for its script's events:\n%s", body)
	}
	data, err := inspect.RenderView(in, "?session=shared")
	if err != nil {
		t.Fatal(err)
	}
	var parts map[string]string
	if err := json.Unmarshal(data, &parts); err != nil {
		t.Fatal(err)
	}
	// The session part of the page (the list of sessions names them
	// anyway) must name both and link to each.
	for _, key := range []string{"alice%2fshared", "bob%2fshared"} {
		if !strings.Contains(parts["session"], `href="?session=`+key+`"`) {
			t.Errorf("the session part for the shared id does not link to %s:\n%s", key, parts["session"])
		}
	}
}
