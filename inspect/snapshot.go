package inspect

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/tools"
)

// Snapshot is what the page shows at one moment: the JSON of /api/state
// and of each "snapshot" event.
type Snapshot struct {
	Title    string    `json:"title"`
	Time     time.Time `json:"time"`
	Runtime  string    `json:"runtime"`
	Faults   bool      `json:"faults"`
	Restarts int       `json:"restarts"`
	// Tree is the supervision tree in depth-first order, the runtime's
	// host first (Depth 0).
	Tree     []Node           `json:"tree"`
	Sessions []SessionSummary `json:"sessions"`
	// Session is the selected session's detail, when one was asked for.
	Session *SessionDetail `json:"session,omitempty"`
	Tools   []ToolFigures  `json:"tools"`
	// Feed is the newest items first.
	Feed []FeedItem `json:"feed"`
}

// Node is one actor of the tree.
type Node struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Role  string `json:"role"` // runtime, agent, agent loop (under a tool: a delegation), stage, model adapter, tool
	State string `json:"state"`
	Depth int    `json:"depth"`
	// Since is when it entered State.
	Since         time.Time  `json:"since"`
	Restarts      int        `json:"restarts"`
	LastFailure   string     `json:"last_failure,omitempty"`
	LastFailureAt *time.Time `json:"last_failure_at,omitempty"`
	Durable       bool       `json:"durable,omitempty"`
	// Flash is set for FlashFor after a restart.
	Flash bool `json:"flash,omitempty"`
	// Ended is when the actor stopped, for an actor the tree keeps
	// showing after its end: one that had restarted or failed, and the
	// ancestors that stopped with it (a delegation's loop), for
	// KeepEnded. Its State is "stopped".
	Ended *time.Time `json:"ended,omitempty"`
}

// SessionSummary is one line of the session list.
type SessionSummary struct {
	// ID is the session's id, or, when another agent's session has the
	// same id, the agent's session key (agent.SessionKey: the agent's
	// name, escaped, '/' and the id); that key selects the session
	// too. A durability position of no session kept is listed by the
	// name it was persisted under.
	ID string `json:"id"`
	// Agent is the name of the agent serving the session (the name of
	// the tool loop around its model adapter), once its adapter was
	// seen.
	Agent   string `json:"agent,omitempty"`
	Open    int    `json:"open_streams"`
	Pending int    `json:"pending_calls"`
	// Approvals is how many calls wait for a person's approval.
	Approvals int       `json:"approvals_waiting"`
	Requests  int       `json:"requests"`
	Answered  bool      `json:"answered"`
	Failed    bool      `json:"failed"`
	Updated   time.Time `json:"updated"`
}

// SessionDetail is the selected session.
type SessionDetail struct {
	ID string `json:"id"` // as listed (see SessionSummary.ID)
	// Agent and Session are the agent (see SessionSummary.Agent) and
	// the session's own id.
	Agent        string        `json:"agent,omitempty"`
	Session      string        `json:"session,omitempty"`
	Conversation []Message     `json:"conversation"`
	Response     string        `json:"response,omitempty"` // the response being given
	Answer       string        `json:"answer,omitempty"`   // the final answer
	Pending      []PendingCall `json:"pending"`
	// Approvals are the calls waiting for a person, held first first
	// (see [Inspector.Approval]).
	Approvals  []WaitingApproval `json:"approvals"`
	Streams    []OpenStream      `json:"streams"`
	Durability *Position         `json:"durability,omitempty"`
	Requests   int               `json:"requests"`
	Errors     int               `json:"errors"`
	LastError  string            `json:"last_error,omitempty"`
}

// Message is one message of a conversation, its text clipped.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

// PendingCall is a tool call without a result yet.
type PendingCall struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Stream string `json:"stream"`
	Args   string `json:"args"` // clipped
	// Age is since the model made the call; Running says the loop runs
	// it (its response ended).
	AgeMS   int64  `json:"age_ms"`
	Age     string `json:"age"`
	Running bool   `json:"running"`
}

// OpenStream is a request the model is answering.
type OpenStream struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Age   string `json:"age"`
}

// Position is a durability position: the index of the last event or
// snapshot (Kind "event" or "snapshot") made durable, at At; Kind
// "salvaged" (Index 0) after a salvage that kept nothing of the name.
type Position struct {
	Index uint64    `json:"index"`
	Kind  string    `json:"kind"`
	At    time.Time `json:"at"`
}

// ToolFigures are one tool's call count, failure kinds and latency
// percentiles (from the end of the model response that made a call,
// when the loop runs it, to its result; over the newest 512 calls
// timed: every call, unless the tool is called more than 8 times in one
// 50 ms tick of the inspector's clock, when the first 8 of each tick are
// timed).
type ToolFigures struct {
	Name     string `json:"name"`
	Calls    int    `json:"calls"`
	Failures int    `json:"failures"`
	// Kinds counts the failures by kind (tools.FailureKind, clipped to
	// Options.Clip): 16 kinds, those of the kinds after them together
	// under [OtherKinds].
	Kinds map[string]int `json:"kinds,omitempty"`
	// Timed is how many calls the percentiles are over.
	Timed int    `json:"timed"`
	P50   string `json:"p50"`
	P90   string `json:"p90"`
	P99   string `json:"p99"`
	// Breaker is the state of its circuit breaker ("closed" until it
	// changed, when OnBreakerChange is hooked).
	Breaker string `json:"breaker"`
	// Stallable tools were wrapped by Inspector.Tools; Stalled and
	// Waiting (calls held) are their switch.
	Stallable bool `json:"stallable"`
	Stalled   bool `json:"stalled"`
	Waiting   int  `json:"waiting"`
}

// Snapshot returns what the page shows now, with the detail of session
// sessionID when it is not empty: a listed id, a session's key (see
// agent.SessionKey), or a bare session id that one agent's session alone
// has (one several agents' sessions have selects none).
func (in *Inspector) Snapshot(sessionID string) Snapshot {
	snap, _ := in.snapshot(sessionID)
	return snap
}

// snapshot is [Inspector.Snapshot], with the keys of the sessions a bare
// session id could mean when several agents' sessions have it (and it
// then selects none). It holds in.mu only to copy what the view shows
// (see capture): the hooks on the hot path take in.mu at every turn, and
// the view is built without it (the session list sorted, the tree
// walked, the conversation decoded, the percentiles sorted).
func (in *Inspector) snapshot(sessionID string) (Snapshot, []string) {
	c := in.capture(sessionID, time.Now())
	if in.building != nil {
		in.building()
	}
	return c.build(sessionID)
}

// captured is what a snapshot's view is built from: the state the view
// shows, copied under in.mu (see capture), none of it written after.
type captured struct {
	now  time.Time
	host string
	clip int
	snap Snapshot // its header and feed
	// actors is the runtime's registry; ended the actors stopped kept
	// shown (see KeepEnded), endedOrder their ids, oldest first.
	actors     []actors.ActorInfo
	ended      map[string]endedActor
	endedOrder []string
	flashes    map[string]time.Time
	models     map[string]bool
	sessions   []sessionRow
	stores     map[string]storePosition
	// details are those of the sessions sessionID may select, the
	// conversations not decoded yet.
	details []sessionDetail
	// tools are the figures without percentiles, lat their samples.
	tools []ToolFigures
	lat   [][]time.Duration
}

// sessionRow is a session as the session list shows it.
type sessionRow struct {
	s         *session // whose row it is: compared, not read outside in.mu
	id, agent string   // as in session
	sum       SessionSummary
}

// key is the session's key (see session.key).
func (r *sessionRow) key() string { return r.agent + "/" + r.id }

// sessionDetail is a session's detail, its conversation not decoded.
type sessionDetail struct {
	s        *session
	d        *SessionDetail
	messages json.RawMessage // not written after: a request replaces it
}

// capture copies under in.mu what the view shows of the state, and the
// details of the sessions sessionID may select (its id or its key).
func (in *Inspector) capture(sessionID string, now time.Time) *captured {
	in.lock()
	defer in.mu.Unlock()
	c := &captured{now: now, host: in.rt.Host().Id, clip: in.opts.Clip,
		snap: Snapshot{Title: in.opts.Title, Time: now, Runtime: in.rt.Host().Id, Faults: in.opts.Faults,
			Restarts: in.restarts, Feed: in.feedNewest(50)}}
	// Read under in.mu: the registry changes before the change is
	// reported to the inspector, so the list read here reflects every
	// change applied (read before the lock, an actor could be missing
	// from it and its record of an end dropped since, by its restart).
	c.actors = in.actors()
	in.expireEnded(now)
	for id, t := range in.flashes {
		if now.Sub(t) > FlashFor {
			delete(in.flashes, id)
		}
	}
	c.ended, c.endedOrder = maps.Clone(in.ended), slices.Clone(in.endedOrder)
	c.flashes, c.models = maps.Clone(in.flashes), maps.Clone(in.models)

	c.sessions = make([]sessionRow, in.sessionOrder.len())
	for i := range c.sessions {
		s := in.sessionOrder.at(i)
		c.sessions[i] = sessionRow{s: s, id: s.id, agent: s.agent, sum: SessionSummary{
			Open: len(s.streams), Pending: len(s.calls), Requests: s.requests, Approvals: len(s.approvals),
			Answered: s.answered, Failed: s.lastError != "" && !s.answered, Updated: time.Unix(0, s.updated)}}
		if sessionID != "" && (s.id == sessionID || isKey(sessionID, s.agent, s.id)) {
			c.details = append(c.details, sessionDetail{s: s, d: in.detail(s, now), messages: s.messages})
		}
	}
	c.stores = maps.Clone(in.stores)

	for _, st := range in.toolList {
		if in.tools[st.name] != st {
			continue // dropped
		}
		tf := ToolFigures{Name: st.name, Calls: st.calls, Failures: st.failures, Breaker: st.breaker, Timed: len(st.lat)}
		if len(st.kinds) > 0 {
			tf.Kinds = maps.Clone(st.kinds)
		}
		c.tools, c.lat = append(c.tools, tf), append(c.lat, slices.Clone(st.lat))
	}
	for name := range in.stalls {
		if in.tools[name] == nil {
			c.tools, c.lat = append(c.tools, ToolFigures{Name: name}), append(c.lat, nil)
		}
	}
	for i := range c.tools {
		if s := in.stalls[c.tools[i].Name]; s != nil {
			c.tools[i].Stallable = true
			c.tools[i].Stalled, c.tools[i].Waiting = s.state()
		}
	}
	return c
}

// isKey reports whether key is agent + "/" + id, without making it.
func isKey(key, agent, id string) bool {
	return len(key) == len(agent)+1+len(id) && strings.HasPrefix(key, agent) && key[len(agent)] == '/' && strings.HasSuffix(key, id)
}

// build makes the snapshot of what c copied, with the detail of the
// session sessionID selects (see snapshot).
func (c *captured) build(sessionID string) (snap Snapshot, ambiguous []string) {
	snap = c.snap
	snap.Tree = c.tree()

	list := c.listed()
	var selected *listed
	for i := range list {
		l := &list[i]
		sum := SessionSummary{ID: l.id, Updated: l.pos.At}
		if r := l.s; r != nil {
			sum = r.sum
			sum.ID, sum.Agent = l.id, agentName(r.agent)
		}
		snap.Sessions = append(snap.Sessions, sum)
		if l.id == sessionID {
			selected = l
		}
	}
	if selected == nil && sessionID != "" {
		// A session's full key selects it whatever it is listed as.
		for i := range list {
			if r := list[i].s; r != nil && r.agent != "" && r.key() == sessionID {
				selected = &list[i]
			}
		}
	}
	if selected == nil && sessionID != "" {
		// A bare session id, listed under its agent's key (another
		// agent's sessions are kept), selects its session when no other
		// agent's session has that id.
		for i := range list {
			if list[i].sessionID() != sessionID {
				continue
			}
			ambiguous = append(ambiguous, list[i].id)
		}
		if len(ambiguous) == 1 {
			for i := range list {
				if list[i].id == ambiguous[0] {
					selected = &list[i]
				}
			}
			ambiguous = nil
		}
	}
	if selected != nil {
		snap.Session = c.detail(selected)
	}

	order := make([]int, len(c.tools))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(c.tools[a].Name, c.tools[b].Name) })
	snap.Tools = make([]ToolFigures, 0, len(order))
	for _, i := range order {
		tf := c.tools[i]
		if tf.Breaker == "" {
			tf.Breaker = tools.BreakerClosed.String()
		}
		if lat := c.lat[i]; len(lat) > 0 {
			p50, p90, p99 := percentiles(lat)
			tf.P50, tf.P90, tf.P99 = shortDuration(p50), shortDuration(p90), shortDuration(p99)
		}
		snap.Tools = append(snap.Tools, tf)
	}
	return snap, ambiguous
}

// tree orders the actors depth first under the runtime's host.
func (c *captured) tree() []Node {
	host, list, now := c.host, c.actors, c.now
	children := map[string][]actors.ActorInfo{}
	known := map[string]bool{host: true}
	for _, a := range list {
		known[a.ID] = true
	}
	var ended []actors.ActorInfo // those not alive again
	for _, id := range c.endedOrder {
		if e := c.ended[id]; !known[id] {
			ended = append(ended, e.info)
		}
	}
	for _, a := range ended {
		known[a.ID] = true
	}
	for _, a := range list {
		parent := a.Parent
		if !known[parent] {
			parent = host // its parent is going away: show it at the top
		}
		children[parent] = append(children[parent], a)
	}
	for _, a := range ended {
		// Under its nearest ancestor still shown (its path says which).
		parent := a.Parent
		for !known[parent] {
			i := strings.LastIndexByte(parent, '/')
			if i < 0 {
				parent = host
				break
			}
			parent = parent[:i]
		}
		children[parent] = append(children[parent], a)
	}
	if len(ended) > 0 {
		for _, c := range children {
			slices.SortFunc(c, func(a, b actors.ActorInfo) int { return strings.Compare(a.ID, b.ID) })
		}
	}
	// A stage whose child is a model adapter is an agent's loop, wherever
	// it runs (a delegation's loop runs under the calling tool).
	loops := map[string]bool{}
	for _, a := range list {
		if c.models[a.Name] {
			loops[a.Parent] = true
		}
	}
	for _, a := range ended {
		if c.ended[a.ID].loop {
			loops[a.ID] = true
		}
	}
	out := []Node{{ID: host, Name: host, Role: "runtime", State: actors.ActorRunning.String()}}
	var walk func(id string, depth int)
	walk = func(id string, depth int) {
		for _, a := range children[id] {
			n := Node{ID: a.ID, Name: a.Name, Role: c.role(a, loops[a.ID]), State: a.State.String(), Depth: depth,
				Since: a.Since, Restarts: a.Restarts, Durable: a.Durable}
			if n.Name == "" {
				n.Name = a.ID[strings.LastIndexByte(a.ID, '/')+1:]
			}
			if a.LastFailure != nil {
				n.LastFailure = clip(a.LastFailure.Error(), c.clip)
				at := a.LastFailureAt
				n.LastFailureAt = &at
			}
			if t, ok := c.flashes[a.ID]; ok && now.Sub(t) <= FlashFor {
				n.Flash = true
			}
			if a.State == actors.ActorStopped {
				at := c.ended[a.ID].at
				n.Ended = &at
			}
			out = append(out, n)
			walk(a.ID, depth+1)
		}
	}
	walk(host, 1)
	return out
}

// role names what a node is: the runtime's children are agents (or
// other stages), a stage around a model adapter is an agent's loop.
func (c *captured) role(a actors.ActorInfo, loop bool) string {
	switch {
	case c.models[a.Name]:
		return "model adapter"
	case strings.HasPrefix(a.Name, "tool-"):
		return "tool"
	case a.Parent == c.host:
		return "agent"
	case loop:
		return "agent loop"
	}
	return "stage"
}

// listed is a line of the session list: a session, its durability
// position, or a position of no session kept.
type listed struct {
	id     string      // as listed
	s      *sessionRow // nil: a position alone
	pos    storePosition
	hasPos bool
}

// listed returns the sessions and the durability positions copied,
// sorted by the ids they are listed by. A position is its session's
// when the name it was persisted under is the session's key (an agent's
// session key: see session.key), or else its id when one session of
// that id is kept (a tool loop persisting under the session id); others
// are listed alone, by their name. A session is listed by its id, but
// by its key when that id is not its own alone (another agent's session
// has it, or a position listed alone, or it is another session's key),
// so that every line has an id of its own.
func (c *captured) listed() []listed {
	n := len(c.sessions)
	out := make([]listed, n, n+len(c.stores))
	keys := make([]string, n)
	byKey := make(map[string]int, n)
	byID := make(map[string]int, n) // -1: several
	for i := range n {
		r := &c.sessions[i]
		out[i].s = r
		keys[i] = r.key()
		byKey[keys[i]] = i
		if _, dup := byID[r.id]; dup {
			byID[r.id] = -1
		} else {
			byID[r.id] = i
		}
	}
	alone := map[string]bool{}
	for name, pos := range c.stores {
		i, ok := byKey[name]
		if !ok {
			i, ok = byID[name]
			ok = ok && i >= 0
		}
		switch {
		case !ok:
			out = append(out, listed{id: name, pos: pos, hasPos: true})
			alone[name] = true
		case !out[i].hasPos || pos.At.After(out[i].pos.At):
			out[i].pos, out[i].hasPos = pos, true
		}
	}
	for i := range n {
		r := out[i].s
		out[i].id = r.id
		if j, key := byKey[r.id]; byID[r.id] < 0 || alone[r.id] || key && j != i {
			out[i].id = keys[i]
		}
	}
	slices.SortFunc(out, func(a, b listed) int { return strings.Compare(a.id, b.id) })
	return out
}

// sessionID is the id of the listed session without its agent: a kept
// session's id, or the id in the key a position is persisted under (as
// agent.SessionKey writes it), or "" for a name that is no such key.
func (l *listed) sessionID() string {
	if l.s != nil {
		return l.s.id
	}
	escaped, id, ok := strings.Cut(l.id, "/")
	if !ok || escaped == "" || nameEscaper.Replace(agentName(escaped)) != escaped {
		return "" // agent.SessionKey never writes it
	}
	return id
}

// key is the session's agent (escaped) and id, as agent.SessionKey
// writes them: the name its agent persists it under. Keys of different
// sessions differ.
func (s *session) key() string { return s.agent + "/" + s.id }

// agentName is the name of the agent whose loop is named loop (the
// escaping of agent.SessionKey read back).
func agentName(loop string) string {
	if strings.IndexByte(loop, '%') < 0 {
		return loop
	}
	return nameUnescaper.Replace(loop)
}

var (
	nameUnescaper = strings.NewReplacer("%2F", "/", "%25", "%")
	nameEscaper   = strings.NewReplacer("%", "%25", "/", "%2F")
)

// detail is the selected line's detail: its session's, as copied, with
// its conversation decoded, and its durability position.
func (c *captured) detail(l *listed) *SessionDetail {
	d := &SessionDetail{Conversation: []Message{}, Pending: []PendingCall{}, Streams: []OpenStream{}, Approvals: []WaitingApproval{}}
	if l.s != nil {
		for _, sd := range c.details {
			if sd.s == l.s.s {
				d = sd.d
				d.Conversation = conversation(sd.messages, c.clip*4)
			}
		}
	}
	d.ID = l.id
	if pos := l.pos; l.hasPos {
		d.Durability = &Position{Index: pos.Index, Kind: pos.Kind, At: pos.At}
	}
	return d
}

// detail copies what the detail of s shows, but for its conversation,
// its durability position and the id it is listed by; in.mu must be
// held.
func (in *Inspector) detail(s *session, now time.Time) *SessionDetail {
	d := &SessionDetail{Conversation: []Message{}, Pending: []PendingCall{}, Streams: []OpenStream{}}
	d.Agent, d.Session = agentName(s.agent), s.id
	d.Requests, d.Errors, d.LastError = s.requests, s.errors, s.lastError
	if s.answered {
		d.Answer = clip(string(s.text), in.opts.Clip*8)
	} else if len(s.text) > 0 {
		d.Response = clip(string(s.text), in.opts.Clip*8)
	}
	d.Approvals = in.waiting(s, now)
	for i := range s.calls {
		p := &s.calls[i]
		age := now.Sub(time.Unix(0, p.since))
		d.Pending = append(d.Pending, PendingCall{ID: clip(p.id(), in.opts.Clip), Name: clip(p.call.GetName(), in.opts.Clip), Stream: p.call.GetStreamId(),
			Args: clip(string(p.args()), in.opts.Clip), AgeMS: age.Milliseconds(), Age: shortDuration(age), Running: p.running})
	}
	for _, st := range s.streams {
		d.Streams = append(d.Streams, OpenStream{ID: st.id, Model: st.model.self.String(), Age: shortDuration(now.Sub(time.Unix(0, st.since)))})
	}
	slices.SortFunc(d.Streams, func(a, b OpenStream) int { return strings.Compare(a.ID, b.ID) })
	return d
}

// conversation decodes a messages payload into clipped messages.
func conversation(payload json.RawMessage, n int) []Message {
	var list []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	}
	out := []Message{}
	if len(payload) == 0 || json.Unmarshal(payload, &list) != nil {
		return out
	}
	for _, m := range list {
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			text = strings.TrimSpace(string(m.Content))
			if text == "null" {
				text = ""
			}
		}
		var b strings.Builder
		b.WriteString(text)
		if m.ToolCallID != "" {
			b.Reset()
			b.WriteString("[" + m.ToolCallID + "] " + text)
		}
		for _, c := range m.ToolCalls {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString("→ " + c.Function.Name + "(" + c.Function.Arguments + ") [" + c.ID + "]")
		}
		out = append(out, Message{Role: m.Role, Text: clip(b.String(), n)})
	}
	return out
}

// shortDuration prints d with three significant digits at most.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
