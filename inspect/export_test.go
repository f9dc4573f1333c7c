package inspect

import "net/http/httptest"

// RenderView renders what the page's event stream sends (view=html) for
// the session selected by query (e.g. "?session=s1").
func RenderView(in *Inspector, query string) ([]byte, error) {
	_, data, err := in.event(httptest.NewRequest("GET", "/api/events"+query, nil), true)
	return data, err
}
