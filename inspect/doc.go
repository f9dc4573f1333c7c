// Package inspect is a live view of a Polyweave runtime in the browser:
// the supervision tree of its actors with their state, restart count and
// last failure; per session the conversation so far, the pending tool
// calls with their age and arguments (clipped), the calls waiting for a
// person's approval (reason, age, deadline), the streams open and the
// durability position; a feed of supervision events, breaker changes and
// approvals asked and answered;
// per-tool call counts, failure kinds, latency percentiles and breaker
// state; and, when the host enables it, fault injection for experiments
// (panic an actor, stall a tool, cut a model stream).
//
// An [Inspector] is an http.Handler that a host mounts where it likes:
//
//	insp, err := inspect.New(rt, nil)
//	model = insp.Model(model)                        // conversations, stream cuts
//	toolset, err = insp.Tools(toolset)               // tool stalls (with Options.Faults)
//	loopOpts.OnToolResult = insp.OnToolResult        // per-tool figures, pending calls
//	loopOpts.Breaker.OnChange = insp.OnBreakerChange // breaker states
//	loopOpts.Approval = insp.Approval(loopOpts.Approval) // calls waiting for approval
//	store = insp.Store(store)                        // durability position
//	ln, err := inspect.Listen("127.0.0.1:8080", nil) // refuses non-loopback addresses
//	go http.Serve(ln, insp)
//
// The tree and the supervision feed come from the runtime itself
// (actors.Runtime.Actors, WatchActors, WatchSupervision); the other hooks
// are optional, and each shows what it sees. None of them adds an actor
// hop: the model hook observes the adapter inside its own actor
// (actors.Spec.Observe), without decorating its Logic.
//
// A session is an agent's: two agents' sessions of one id are two
// sessions, listed by their agents' session keys (agent.SessionKey), and
// the durability position an agent's store shows is that of the session
// it persisted. The agent of a session is the tool loop whose model
// adapter served it, which package agent names after the agent.
//
// An actor that stopped after a restart or a failure stays in the tree,
// marked ended, with the ancestors that stopped with it, for KeepEnded
// (or until its path runs again): a tool that crashed in a sub-agent's
// delegation stays in sight, under the calling tool, once the delegation
// is over. A restart of the calling tool keeps it (the past children of
// an incarnation are history); the same path started afresh replaces
// the records under it.
//
// The page is one screen: the tree on the left, the selected session on
// the right, the feed and the tools below; restarts flash. It is
// html/template output, but for the session list, which is written in
// Go with the same markup and escaping (it grows with the sessions kept
// and is redrawn at every event), and a small hand-written script
// (embedded, no external assets) that follows the server-sent events of
// /api/events and re-renders; without JavaScript the page refreshes
// itself.
//
// # Endpoints
//
//   - GET / : the page (?session=ID selects a session, as for
//     /api/state: 409 with links to the sessions a bare id could mean);
//   - GET /api/state : the snapshot as JSON (?session=ID adds its detail;
//     ID is a listed id, an agent's session key, or a bare session id
//     that one agent's session alone has: 409 with the keys of the
//     sessions when several agents' sessions have it);
//   - GET /api/events : server-sent events, one "snapshot" event (the same
//     JSON) at once and then whenever something changed, at most every
//     Options.Interval;
//   - POST /api/fault/panic (actor=ID), /api/fault/stall (tool=NAME,
//     on=true|false), /api/fault/cut (stream=ID): only with
//     Options.Faults; absent (404) otherwise. A form post without
//     JavaScript is redirected back to the page.
//
// # Exposure
//
// The inspector shows conversations and tool arguments, and with Faults
// it can break things: by default it answers loopback clients only
// (403 otherwise; a request a proxy forwarded, saying so with Forwarded,
// X-Forwarded-For, -Host, -Proto or -Port, X-Real-IP or Via, is its
// client's, not loopback) and [Listen] refuses to listen on other addresses;
// Options.AllowRemote and ListenOptions.AllowRemote lift that. Fault
// posts must come from the page's own origin (Origin, its scheme, host
// and port, and Sec-Fetch-Site are checked), so another site open in the
// same browser cannot send them, nor frame the page (X-Frame-Options and
// the Content-Security-Policy frame-ancestors allow its own origin
// alone). A post with neither header is refused: browsers send them,
// and a client without a browser (a script, curl) sends Origin, the
// inspector's own (curl -H 'Origin: http://127.0.0.1:8080' ...); behind
// a proxy ending TLS (AllowRemote), the scheme is its X-Forwarded-Proto
// (a chain's first), which no page can make a browser send; a proxy
// must pass on the Host it was asked with, which the Origin is compared
// with.
// A fault form's body is 8 KiB at most (413 past it).
// Host headers other than loopback names are refused unless AllowRemote
// (DNS rebinding): with it, any name is served, and a proxy answering
// only the inspector's own names is what keeps a rebinding page out.
package inspect
