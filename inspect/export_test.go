package inspect

import "net/http/httptest"

// RenderView renders what the page's event stream sends (view=html) for
// the session selected by query (e.g. "?session=s1").
func RenderView(in *Inspector, query string) ([]byte, error) {
	_, data, err := in.event(httptest.NewRequest("GET", "/api/events"+query, nil), true)
	return data, err
}

// lookup returns a session of id (the first found, of any agent), or
// nil; in.mu must be held.
func (in *Inspector) lookup(id string) *session {
	var found *session
	in.index.twins(id, in.index.hash(id), func(s *session) bool {
		found = s
		return false
	})
	return found
}
