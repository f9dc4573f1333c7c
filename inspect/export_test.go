package inspect

import (
	"maps"
	"net/http/httptest"
	"slices"

	"github.com/polyweave/polyweave-go/actors"
)

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

// NewWatching is New, calling watching after the inspector started
// watching the runtime and before it reads the actors alive.
func NewWatching(rt *actors.Runtime, o *Options, watching func()) (*Inspector, error) {
	return newInspector(rt, o, watching)
}

// Remembered counts the actors whose last failure the inspector keeps.
func Remembered(in *Inspector) int { return len(RememberedIDs(in)) }

// RememberedIDs are the ids of the actors whose last failure the
// inspector keeps, sorted.
func RememberedIDs(in *Inspector) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Sorted(maps.Keys(in.failures))
}
