package tools

import (
	"fmt"
	"slices"
	"strings"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// dispatcher runs calls on tool actors that are children of the stage
// that owns it (a router, the installer or the loop), and guarantees that
// every call it accepts is answered exactly once through deliver: by the
// tool, or by the dispatcher itself for an unknown, gone or unavailable
// (circuit-open) tool and for a call the runtime answered in the tool's
// stead (an ERROR of its actor: see failed). It lives inside one actor
// and is not safe for concurrent use.
type dispatcher struct {
	// slots finds a tool's slot by name; nil for a few tools, found by
	// a scan of order (see slot).
	slots   map[string]*slot
	order   []*slot
	byRef   map[string]*slot // the async tools' actors; made by start
	breaker BreakerOptions
	// outstanding are the calls sent to tool actors and not answered
	// yet; nil until the first is sent, so that a dispatcher of sync
	// tools only (answered in the caller's turn) looks up no map's
	// memory per call.
	outstanding map[callKey]outstanding
	// perStream, when set (countStreams), counts the outstanding calls
	// of each stream; streams with none are not in it.
	perStream map[string]int
	deliver   func(c actors.WrapperContext, call, result *messages.Frame)
	gate      *approvalGate // nil: every call runs (see ApprovalOptions)
}

type slot struct {
	tool    *Tool
	ref     actors.Ref
	gone    bool
	breaker Breaker
	// reported is the breaker state last told to BreakerOptions.OnChange.
	reported BreakerState
}

type outstanding struct {
	call *messages.Frame
	slot *slot
}

// Timer keys of the breaker.
type (
	breakerExpired struct{ tool string }
	breakerCooled  struct{ tool string }
)

func newDispatcher(tools []*Tool, b BreakerOptions, deliver func(c actors.WrapperContext, call, result *messages.Frame)) *dispatcher {
	d := &dispatcher{breaker: b, deliver: deliver}
	// One allocation for the slots and one for their order: a dispatcher
	// lives as long as its loop or router, one per session.
	all := make([]slot, len(tools))
	d.order = make([]*slot, len(tools))
	for i, t := range tools {
		all[i] = slot{tool: t, breaker: Breaker{Threshold: b.Failures}}
		d.order[i] = &all[i]
	}
	if len(tools) > scanSlots {
		d.slots = make(map[string]*slot, len(tools))
		for _, s := range d.order {
			d.slots[s.tool.Name()] = s
		}
	}
	return d
}

// scanSlots is the most tools a dispatcher finds by scanning its slots
// rather than through a map (a short scan costs no more than the hash, and
// the map's memory is kept for the dispatcher's life).
const scanSlots = 8

// slot returns the slot of the tool named name.
func (d *dispatcher) slot(name string) (*slot, bool) {
	if d.slots != nil {
		s, ok := d.slots[name]
		return s, ok
	}
	for _, s := range d.order {
		if s.tool.Name() == name {
			return s, true
		}
	}
	return nil, false
}

// start spawns the actors of the async tools; sync tools run inline, in
// the dispatcher's turn.
func (d *dispatcher) start(c actors.Context) {
	for _, s := range d.order {
		if s.tool.def.Sync {
			continue
		}
		ref, err := c.Spawn(s.tool.Spec())
		if err != nil {
			c.Fail(fmt.Errorf("start tool %q: %w", s.tool.Name(), err))
		}
		s.ref = ref
		s.gone = false
		if d.byRef == nil {
			d.byRef = make(map[string]*slot)
		}
		d.byRef[ref.String()] = s
	}
}

// run dispatches an atomic TOOL_CALL. A call whose id is already
// outstanding in its stream is dropped: it has an answer coming.
func (d *dispatcher) run(c actors.WrapperContext, call *messages.Frame) {
	key := keyOf(call)
	if _, dup := d.outstanding[key]; dup {
		c.Logger().Warn("duplicate tool call dropped", "tool", call.GetName(), "tool_call_id", key.id)
		return
	}
	s, ok := d.slot(call.GetName())
	switch {
	case !ok:
		d.deliver(c, call, errorResult(call, FailureUnknownTool, fmt.Sprintf("Unknown tool: %s", call.GetName())))
		return
	case s.gone:
		d.deliver(c, call, errorResult(call, FailureUnavailable, fmt.Sprintf("Tool %s is unavailable: it was stopped after repeated failures", s.tool.Name())))
		return
	}
	// Held before the breaker is asked: a held call must not take a
	// half-open breaker's one trial.
	if d.gate != nil && d.gate.hold(c, d, call, s) {
		return
	}
	if !d.breaker.Disabled && !s.breaker.Allow() {
		d.deliver(c, call, errorResult(call, FailureUnavailable, fmt.Sprintf(
			"Tool %s is temporarily unavailable: it failed %d times within %v; answer without it or try again later",
			s.tool.Name(), d.breaker.Failures, d.breaker.Window)))
		return
	}
	if s.tool.def.Sync {
		// Answered in this turn: nothing else can see it outstanding.
		d.settle(c, s, call, s.tool.callInline(c, call))
		return
	}
	if d.outstanding == nil {
		d.outstanding = make(map[callKey]outstanding)
	}
	d.outstanding[key] = outstanding{call: call, slot: s}
	if d.perStream != nil {
		d.perStream[key.stream]++
	}
	c.Send(s.ref, call)
}

// reject answers call without running it.
func (d *dispatcher) reject(c actors.WrapperContext, call *messages.Frame, message string) {
	d.deliver(c, call, errorResult(call, FailureInvalidArguments, message))
}

// cancel forwards a CANCEL or ABORT to the tools running calls of its
// stream; their cancelled results come back as usual.
func (d *dispatcher) cancel(c actors.WrapperContext, f *messages.Frame) {
	if d.gate != nil {
		d.gate.cancel(c, d, f)
	}
	sent := map[*slot]bool{}
	for k, o := range d.outstanding {
		if k.stream != f.GetStreamId() || sent[o.slot] {
			continue
		}
		if f.GetType() == messages.FrameType_CANCEL && f.GetToolCallId() != "" && f.GetToolCallId() != k.id {
			continue
		}
		sent[o.slot] = true
		c.Send(o.slot.ref, f)
	}
}

// handle takes the messages of the tool actors and the breaker's timers.
// It reports whether msg was one of them.
func (d *dispatcher) handle(c actors.WrapperContext, msg any) bool {
	if d.gate != nil && d.gate.timer(c, d, msg) {
		return true
	}
	switch m := msg.(type) {
	case actors.ChildFrame:
		s, ok := d.byRef[m.Child.String()]
		if !ok {
			return false
		}
		switch m.Frame.GetType() {
		case messages.FrameType_TOOL_RESULT:
			d.result(c, s, m.Frame)
		case messages.FrameType_ERROR:
			d.failed(c, s, m.Frame)
		}
		return true // the END closing a call, a DESCRIPTION: nothing to pass on
	case actors.ChildStopped:
		s, ok := d.byRef[m.Child.String()]
		if !ok {
			return false
		}
		// The tool's supervisor gave up on it. Its calls were answered by
		// its failure handler; answer any that were not, and refuse new ones.
		s.gone = true
		delete(d.byRef, m.Child.String())
		for _, o := range d.outstanding {
			if o.slot == s {
				d.result(c, s, errorResult(o.call, FailureStopped, fmt.Sprintf("Tool %s stopped", s.tool.Name())))
			}
		}
		return true
	case actors.Timer:
		switch k := m.Key.(type) {
		case breakerExpired:
			if s, ok := d.slot(k.tool); ok {
				s.breaker.Expire()
			}
			return true
		case breakerCooled:
			if s, ok := d.slot(k.tool); ok {
				s.breaker.Cooled()
				d.breakerChanged(s, BreakerHalfOpen)
			}
			return true
		}
	}
	return false
}

// failed answers the calls of s that an ERROR of its actor answers: the
// runtime answers a call itself when the tool's Logic failed on it and
// was resumed (failure kind actors.FailedKind), when it refuses a call
// while the actor restarts or stops, and when the actor's incarnation
// ends with the call open. An ERROR with a tool-call id answers that
// call; one without answers every call of s on its stream. Each becomes
// an error result of the ERROR's failure kind (FailureStopped when it
// has none: the actor restarted), delivered once: what the tool or the
// runtime sends of an answered call later finds it no longer outstanding.
func (d *dispatcher) failed(c actors.WrapperContext, s *slot, e *messages.Frame) {
	kind := FailureKind(e.GetMeta().GetFailureKind())
	if kind == "" {
		kind = FailureStopped
	}
	answer := func(call *messages.Frame) {
		d.result(c, s, errorResult(call, kind, fmt.Sprintf("Tool %s failed: %s", s.tool.Name(), e.GetText())))
	}
	if id := e.GetToolCallId(); id != "" {
		if o, ok := d.outstanding[callKey{e.GetStreamId(), id}]; ok && o.slot == s {
			answer(o.call)
		}
		return
	}
	var calls []*messages.Frame
	for k, o := range d.outstanding {
		if k.stream == e.GetStreamId() && o.slot == s {
			calls = append(calls, o.call)
		}
	}
	// In a stable order, as the model would read them: by tool-call id.
	slices.SortFunc(calls, func(a, b *messages.Frame) int { return strings.Compare(a.GetToolCallId(), b.GetToolCallId()) })
	for _, call := range calls {
		answer(call)
	}
}

// breakerChanged tells BreakerOptions.OnChange when the breaker of s has
// just moved to state (a step that left it as it was tells nothing).
func (d *dispatcher) breakerChanged(s *slot, state BreakerState) {
	if d.breaker.OnChange == nil || s.breaker.State() != state || s.reported == state {
		return
	}
	s.reported = state
	d.breaker.OnChange(s.tool.Name(), state)
}

func (d *dispatcher) result(c actors.WrapperContext, s *slot, result *messages.Frame) {
	key := keyOf(result)
	o, ok := d.outstanding[key]
	if !ok {
		return // not ours or answered already: never deliver twice
	}
	delete(d.outstanding, key)
	if d.perStream != nil {
		if n := d.perStream[key.stream] - 1; n > 0 {
			d.perStream[key.stream] = n
		} else {
			delete(d.perStream, key.stream)
		}
	}
	d.settle(c, s, o.call, result)
}

// settle counts result for s's breaker and delivers it as call's answer.
// The call is answered before the host's OnChange hears of a change in
// the breaker: the call is no longer among the outstanding ones, so a
// panicking OnChange would otherwise leave it without an answer.
func (d *dispatcher) settle(c actors.WrapperContext, s *slot, call, result *messages.Frame) {
	changed, state := false, BreakerClosed
	if !d.breaker.Disabled {
		switch kind := KindOf(result); {
		case kind == "":
			s.breaker.Success()
			changed = true
		case kind.countsAgainstTool():
			c.After(d.breaker.Window, breakerExpired{s.tool.Name()})
			if s.breaker.Failure() {
				c.Logger().Warn("tool circuit opened", "tool", s.tool.Name())
				c.After(d.breaker.Cooldown, breakerCooled{s.tool.Name()})
				changed, state = true, BreakerOpen
			}
		default:
			s.breaker.Neutral()
		}
	}
	d.deliver(c, call, result)
	if changed {
		d.breakerChanged(s, state)
	}
}

// countStreams makes inStream answer without going through every
// outstanding call: from then on the dispatcher counts them per stream.
// Call it before the first call.
func (d *dispatcher) countStreams() { d.perStream = map[string]int{} }

// inStream is the number of outstanding calls of a stream; it needs
// countStreams.
func (d *dispatcher) inStream(stream string) int { return d.perStream[stream] }

// forget drops every outstanding call without answering it and returns
// them, for the owner to answer (as a failing call runner does).
func (d *dispatcher) forget() []outstanding {
	out := make([]outstanding, 0, len(d.outstanding))
	for _, o := range d.outstanding {
		out = append(out, o)
	}
	clear(d.outstanding)
	clear(d.perStream)
	return out
}
