package mcp_test

import "testing"

// TestImport_ServerThatForgotTheSessionWithoutABody: a streamable HTTP
// server that answers a request of a session it no longer knows with a
// bare 404 (no JSON-RPC error body: go-sdk's own servers, and the spec's
// minimum) makes go-sdk fail the call with ErrSessionMissing and end the
// session's connection. The import connects again, as for a 404 with a
// body: the call that found the session gone is answered with an error
// and not run again, and the next call runs over a new session.
func TestImport_ServerThatForgotTheSessionWithoutABody(t *testing.T) {
	testSessionForgotten(t, false)
}
