package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// Approval returns o (nil: nil) with its policy watched, so that the
// page shows the calls waiting for a person: per session (tool, call id,
// clipped arguments, reason, age, deadline) and in the feed. Give it to
// tools.LoopOptions.Approval or agent.Options.Approval together with
// [Inspector.OnToolResult]: a waiting call is shown until its result
// (denied, its deadline passed, cancelled, or run once approved), or
// until it starts running when its tool was wrapped by [Inspector.Tools].
//
// The inspector sees the calls its policy asks about. Calls a durable
// session held in an earlier process (before a restart) are not asked
// about again when it resumes: give their sessions to
// [Inspector.RestoreApprovals] to show them.
func (in *Inspector) Approval(o *tools.ApprovalOptions) *tools.ApprovalOptions {
	if o == nil {
		return nil
	}
	opts := *o
	policy := opts.Policy
	if policy == nil {
		policy = tools.DefaultApprovalPolicy
	}
	opts.Policy = func(c tools.ApprovalCall) (tools.Verdict, string) {
		v, reason := policy(c)
		if v == tools.VerdictAsk {
			in.held(heldApproval{id: c.ToolCallID, tool: c.Tool.Name, stream: c.StreamID, args: slices.Clip(c.Arguments),
				reason: reason, since: time.Now(), deadline: c.Deadline})
		}
		return v, reason
	}
	return &opts
}

// RestoreApprovals shows the calls that the durable sessions sessionIDs
// hold for approval in store (tools.ReadApprovals): calls asked about
// in an earlier process, which a host restarting with the same store
// finds waiting. They are followed as the calls held live: shown until
// their result comes (with [Inspector.OnToolResult]; the session's loop
// answers them once resumed, on the stream named after the session, as
// package agent resumes them) or they start running (with
// [Inspector.Tools]). When they were held is not stored: their age
// counts from the restore. Sessions that hold nothing are skipped; it
// returns the first error reading the store, after reading the others.
func (in *Inspector) RestoreApprovals(store durability.Store, sessionIDs ...string) error {
	return in.restoreApprovals(store, "", func(id string) string { return id }, sessionIDs)
}

// RestoreAgentApprovals is [Inspector.RestoreApprovals] for the sessions
// of the agent named agentName, which keeps them in store under
// agent.SessionKey of its name and the session id.
func (in *Inspector) RestoreAgentApprovals(store durability.Store, agentName string, sessionIDs ...string) error {
	// The agent's name as its loop is named: its key's first element.
	loop := strings.TrimSuffix(agent.SessionKey(agentName, ""), "/")
	return in.restoreApprovals(store, loop, func(id string) string { return agent.SessionKey(agentName, id) }, sessionIDs)
}

// restoreApprovals restores the calls of sessionIDs, of the agent whose
// loop is named loop ("" unknown), each read from store under key(id).
func (in *Inspector) restoreApprovals(store durability.Store, loop string, key func(string) string, sessionIDs []string) error {
	var errs []error
	now := time.Now()
	for _, id := range sessionIDs {
		reqs, err := tools.ReadApprovals(store, key(id))
		if err != nil {
			errs = append(errs, fmt.Errorf("inspect: restore approvals of session %q: %w", id, err))
			continue
		}
		for _, r := range reqs {
			// The stream the session's first attempt runs on: a '#' or
			// '%' of the id escaped, so that it is not read as an
			// attempt's suffix (see agent.StreamID).
			in.held(heldApproval{id: r.ToolCallID, tool: r.Tool, stream: agent.StreamID(id, 1), session: id, args: slices.Clip(r.Arguments),
				reason: r.Reason, since: now, deadline: r.Deadline, restored: true, agent: loop})
		}
	}
	return errors.Join(errs...)
}

// heldApproval is a call waiting for a person.
type heldApproval struct {
	id, tool, stream string
	args             []byte
	reason           string
	since            time.Time // when it was held (restored: read from the store)
	deadline         time.Time // zero: none
	// restored calls were read from a store: their session answers them
	// on a stream of its own, of any attempt (its sessionKey is session,
	// the session's id).
	restored bool
	session  string
	// agent is the session's agent (see session.agent), when known.
	agent string
}

// is reports whether h is the call id of stream.
func (h *heldApproval) is(stream, id string) bool {
	return h.id == id && (h.stream == stream || h.restored && h.session == sessionKey(stream))
}

// WaitingApproval is a call waiting for a person's approval.
type WaitingApproval struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Stream string `json:"stream"`
	Args   string `json:"args"` // clipped
	Reason string `json:"reason,omitempty"`
	// Age is since the call was held.
	AgeMS int64  `json:"age_ms"`
	Age   string `json:"age"`
	// Deadline is when it is denied unless answered; nil without one.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Restored calls were held in an earlier process and read from the
	// store ([Inspector.RestoreApprovals]): Age counts from the restore.
	Restored bool `json:"restored,omitempty"`
}

func (in *Inspector) held(h heldApproval) {
	text := fmt.Sprintf("%s call %s on %s waits for approval", clip(h.tool, in.opts.Clip), clip(h.id, in.opts.Clip), h.stream)
	if h.restored {
		text += " (held before a restart, read from the store)"
	}
	if h.reason != "" {
		text += ": " + h.reason
	}
	if !h.deadline.IsZero() {
		text += fmt.Sprintf(" (denied unless answered by %s)", h.deadline.Format(time.RFC3339))
	}
	in.lock()
	s := in.heldSession(h)
	if i := slices.IndexFunc(s.approvals, func(a heldApproval) bool { return a.is(h.stream, h.id) }); i >= 0 {
		if s.approvals[i].restored && !h.restored {
			h.since = s.approvals[i].since // it has waited since the restore at least
		}
		s.approvals[i] = h
	} else {
		s.approvals = append(s.approvals, h)
	}
	in.addFeed(FeedItem{Time: h.since, Kind: "approval", Text: text})
	in.mu.Unlock()
	in.changed()
}

// heldSession returns the session of a call held, making it: its
// agent's, when known; else, among the sessions of its id (of any
// agent), the one where the model made the call; in.mu must be held.
func (in *Inspector) heldSession(h heldApproval) *session {
	if h.agent != "" {
		return in.session(h.stream, h.agent)
	}
	s := in.twinOf(h.stream, func(s *session) bool { return s.call(h.id) != nil })
	if s == nil {
		s = in.session(h.stream, "")
	}
	return s
}

// answered forgets a waiting call (if it waits) and says in the feed how
// it was answered; in.mu must be held.
func (in *Inspector) answered(stream, id string, how func(heldApproval) string) bool {
	i := -1
	s := in.twinOf(stream, func(s *session) bool {
		i = slices.IndexFunc(s.approvals, func(a heldApproval) bool { return a.is(stream, id) })
		return i >= 0
	})
	if i < 0 {
		return false
	}
	h := s.approvals[i]
	s.approvals = slices.Delete(s.approvals, i, i+1)
	in.addFeed(FeedItem{Kind: "approval", Text: fmt.Sprintf("%s call %s on %s %s", clip(h.tool, in.opts.Clip), clip(h.id, in.opts.Clip), h.stream, how(h))})
	return true
}

// approvedRun sees a wrapped tool's handler start: a waiting call that
// runs was approved.
func (in *Inspector) approvedRun(ctx context.Context) {
	call, ok := tools.CallFrom(ctx)
	if !ok {
		return
	}
	in.lock()
	found := in.answered(call.StreamID, call.ToolCallID, func(heldApproval) string { return "was approved: it runs" })
	in.mu.Unlock()
	if found {
		in.changed()
	}
}

// approvalResult is how a waiting call's result answers it.
func approvalResult(kind string) func(heldApproval) string {
	return func(heldApproval) string {
		switch kind {
		case "":
			return "was approved and ran"
		case string(tools.FailureDenied):
			return "was denied (by a person or its deadline): not run"
		case string(tools.FailureCancelled):
			return "was cancelled while it waited for approval"
		}
		return "was approved and failed (" + kind + ")"
	}
}

// waiting lists a session's waiting calls; in.mu must be held.
func (in *Inspector) waiting(s *session, now time.Time) []WaitingApproval {
	out := make([]WaitingApproval, 0, len(s.approvals))
	for _, h := range s.approvals {
		age := now.Sub(h.since)
		w := WaitingApproval{ID: clip(h.id, in.opts.Clip), Tool: clip(h.tool, in.opts.Clip), Stream: h.stream, Args: clip(string(h.args), in.opts.Clip), Reason: h.reason,
			AgeMS: age.Milliseconds(), Age: shortDuration(age), Restored: h.restored}
		if !h.deadline.IsZero() {
			d := h.deadline
			w.Deadline = &d
		}
		out = append(out, w)
	}
	return out
}
