package tools

import (
	"context"
	"fmt"
	"slices"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// RouterOptions configure a router. A nil *RouterOptions or a zero field
// means the default. Options are copied by the constructors.
type RouterOptions struct {
	// Name is the router actor's name under its parent; default
	// "tool-router" ("tool-installer" for an installer).
	Name string
	// Tools are the tools the router runs.
	Tools []*Tool
	// Handlers are more tools given as name → handler, seed style, with
	// default definitions. Names must not repeat those of Tools.
	Handlers map[string]HandlerFunc
	// Breaker configures the per-tool circuit breaker.
	Breaker BreakerOptions
	// Supervision supervises the inner duplex and the tool actors; nil
	// means the runtime's default (restart, 10 times in 10 s).
	Supervision *supervisor.Strategy
	// Durability, when set, persists the router's pending streaming calls
	// and makes its state observable (see [DurabilityOptions]). Only the
	// routers take it: NewInstaller and NewLoop reject it (a loop persists
	// sessions instead: [LoopOptions].Session).
	Durability *DurabilityOptions
	// OnCall, when set, is called twice for each call the stage runs,
	// on the goroutine that runs the call's handler, with the handler's
	// ctx ([CallFrom] gives the call; each handler running has a ctx of
	// its own): with ended false just before the handler, and with ended
	// true once the handler has returned (or panicked): before its
	// result answers the call, and after the call's timeout or
	// cancellation did, when the handler outlives them (its ctx has then
	// ended: a handler whose ctx has ended is no longer waited for).
	// Sync tools included, every handler the stage runs is between the
	// two; a call answered without its handler (an unknown tool, invalid
	// arguments, an open circuit, a call refused approval) never reaches
	// it.
	// It lets the stage's owner know which of its calls are in their
	// handlers, without goroutine ids: an agent knows by it that a
	// conversation waits for a handler, which may be one that closes
	// the agent (see agent.Agent.Close). It runs in every call's path:
	// keep it quick, never block in it, and allocate nothing in it.
	OnCall func(ctx context.Context, ended bool)
}

// toolSet merges Tools and Handlers and checks names are unique.
func toolSet(defs []*Tool, handlers map[string]HandlerFunc, sync bool) ([]*Tool, error) {
	fromMap, err := FromHandlers(handlers, sync)
	if err != nil {
		return nil, err
	}
	all := append(append([]*Tool(nil), defs...), fromMap...)
	seen := map[string]bool{}
	for i, t := range all {
		if t == nil {
			return nil, fmt.Errorf("tool %d of %d is nil", i+1, len(all))
		}
		if seen[t.Name()] {
			return nil, fmt.Errorf("tool %q given twice", t.Name())
		}
		seen[t.Name()] = true
	}
	return all, nil
}

// prepare validates the options of a stage named defaultName by default
// around inner (nil for a stage with none), and returns them with
// defaults applied and the tools.
func (o *RouterOptions) prepare(inner *actors.Spec, defaultName string, sync bool) (RouterOptions, []*Tool, error) {
	var opts RouterOptions
	if o != nil {
		opts = *o
	}
	if opts.Name == "" {
		opts.Name = defaultName
	}
	if inner != nil && inner.New == nil { // a zero spec: the stage would fail at its start
		return opts, nil, fmt.Errorf("%s %q: the inner spec (the model) has no New function", defaultName, opts.Name)
	}
	if opts.Durability != nil && defaultName != routerDefaultName {
		return opts, nil, fmt.Errorf("%s %q: durability options are for routers", defaultName, opts.Name)
	}
	var err error
	if opts.Breaker, err = opts.Breaker.withDefaults(); err != nil {
		return opts, nil, fmt.Errorf("router %q: %w", opts.Name, err)
	}
	all, err := toolSet(opts.Tools, opts.Handlers, sync)
	if err != nil {
		return opts, nil, fmt.Errorf("router %q: %w", opts.Name, err)
	}
	if opts.OnCall != nil {
		for i, t := range all {
			all[i] = t.onCall(opts.OnCall)
		}
	}
	return opts, all, nil
}

// NewRouter returns the spec of a tool router around inner (the model
// adapter). On the response path it intercepts TOOL_CALLs (atomic, and
// streaming ones once complete), runs them (async tools on tool actors
// that are its children, Sync tools inline in its own turn), writes each
// call's one TOOL_RESULT into inner's sink and drops the call from the
// outgoing stream; every other frame passes unchanged.
// Unknown tools, invalid arguments and unavailable tools get error results.
// CANCEL and ABORT on the request path go to inner and cancel the stream's
// calls they concern (a CANCEL's named call, or all of them when it names
// none; all of them for an ABORT): one running gets its cancelled result
// from its tool, and one still receiving its arguments gets a cancelled
// result (FailureCancelled) at once, before the CANCEL or ABORT goes on,
// and is forgotten, so what more of it comes from inner (chunks,
// completion, the stream's END) neither runs it nor answers it again. A
// call inner starts after a CANCEL of its whole stream or an ABORT went
// through (inner had not seen it yet) and whose arguments inner's end of
// the stream (END or ERROR) then cuts short is answered as cancelled too,
// at that end. A call whose stream ends with no such CANCEL or ABORT
// before its arguments are complete is answered as invalid arguments.
// The model's END or ERROR with the tool-call id of one of several calls
// the consumer has open on a stream (the frames it wrote there that open
// calls, as the runtime counts them, carry several ids: see
// actors.OpensStream) ends that call alone, as it does for the runtime:
// of the calls pending there, it ends only the one of that id, if there
// is one (answered as invalid arguments, or as cancelled after a CANCEL
// of the stream or an ABORT, as above), and the others stay pending,
// their arguments still to come. An END or ERROR of no id, or of the id
// of the consumer's only call there, ends the stream and every call
// pending on it; so does one of any id on a stream the consumer has no
// call open on (one only the model wrote on, or one the router, as its
// runtime, forgot: see below). The
// consumer's call is open until the model's END of it, as for the
// runtime: an ERROR of its id before that END (the runtime answers one
// of several calls with both) leaves the stream's other calls as they
// were, so the END that follows ends that call alone too. What the consumer still writes of a call the model ended so (an
// argument chunk on its way, a frame with its id but a TOOL_CALL or
// DESCRIBE, which begin the call again) opens nothing, as for the
// runtime: the END of the consumer's last call left ends the stream. The
// model's second END of such a call, however long ago it ended, ends
// only the call pending of its id, if any, as the runtime takes it for
// the end of no other; so does its second END of the call whose END
// closed the stream (of the latest 16 streams so closed), on the stream
// closed or opened since by a call of another id, which the runtime
// drops; and so does its END or ERROR of an id the
// consumer has no call of on a stream where it has one open (the model's
// answer to a frame of no call it knows), which the runtime cannot tell
// from a second END of a call it no longer remembers. The router keeps
// and forgets the streams as its runtime does: every stream with a call
// of the consumer's open, the first two it opens (and, once one is
// ended, the next), and, of the streams whose calls the model ended by
// their ids alone (frames of no id still open there: a model that never
// ends its streams) or that the model opened with what the router passed
// out, the 1024 to 1280 opened last, however lately written on and
// whatever calls of the model's are pending there. On a stream it forgot,
// the consumer's next call is the stream's only call.
// Handlers given as a map run Sync (the seed's synchronous router): keep
// them cheap.
func NewRouter(inner actors.Spec, opts *RouterOptions) (actors.Spec, error) {
	return newRouter(inner, opts, true)
}

// NewAsyncRouter is [NewRouter] with map handlers run asynchronously, each
// call on its own goroutine (the seed's async router).
func NewAsyncRouter(inner actors.Spec, opts *RouterOptions) (actors.Spec, error) {
	return newRouter(inner, opts, false)
}

// NewStreamingRouter is [NewAsyncRouter] for model adapters that stream
// tool-call arguments: a streaming TOOL_CALL is registered, its TEXT
// chunks (meta.tool_arg_stream) are buffered per tool-call id and the call
// runs at its META tool_complete. (Every router assembles streaming calls
// — running half a call is never right — so this constructor is the seed's
// name for the same router.) Its pending state is an [Assembler]'s
// [PendingCalls]. A call cut short by a CANCEL or ABORT of its stream is
// answered as cancelled, once, as [NewRouter] says; one cut short by the
// end of its stream alone, as invalid arguments.
func NewStreamingRouter(inner actors.Spec, opts *RouterOptions) (actors.Spec, error) {
	return newRouter(inner, opts, false)
}

// routerDefaultName is the default name of routers (and the defaultName
// by which prepare knows it is preparing a router).
const routerDefaultName = "tool-router"

func newRouter(inner actors.Spec, o *RouterOptions, sync bool) (actors.Spec, error) {
	opts, all, err := o.prepare(&inner, routerDefaultName, sync)
	if err != nil {
		return actors.Spec{}, err
	}
	if opts.Durability == nil {
		spec := actors.Wrap(opts.Name, inner, func() actors.Wrapped { return newRouterLogic(all, opts.Breaker) })
		spec.Supervision = opts.Supervision
		return spec, nil
	}
	dopts, provider, err := opts.Durability.prepare(opts.Name)
	if err != nil {
		return actors.Spec{}, fmt.Errorf("router %q: %w", opts.Name, err)
	}
	spec := actors.Wrap(opts.Name, inner, func() actors.Wrapped {
		return newDurableRouter(newRouterLogic(all, opts.Breaker), dopts)
	})
	spec.Supervision = opts.Supervision
	spec.Persistence = provider
	return spec, nil
}

// routerLogic is the Wrapped of every router and of the installer.
type routerLogic struct {
	d   *dispatcher
	asm Assembler
	// install, when set, runs on request frames instead of passing them.
	install func(c actors.WrapperContext, f *messages.Frame)
	// take, when set, removes a pending call a CANCEL or ABORT answers
	// instead of applying the removal alone (a durable router persists
	// it first).
	take func(c actors.WrapperContext, e Event)
	// cut holds the streams a CANCEL of the whole stream (false) or an
	// ABORT (true) went through towards inner for, until inner ends them
	// (END or ERROR): the calls such an end cuts short are answered as
	// cancelled, since inner started them before it had the CANCEL or
	// ABORT. Nil until the first one: nothing on the path without them.
	// A durable router does not persist it: a restart closes the open
	// streams. A CANCEL that comes after inner ended its stream leaves an
	// entry no END removes: cutOrder keeps the order they were added in,
	// and past cutLimit the oldest go.
	cut      map[string]bool
	cutOrder []string
	// calls holds the consumer's calls on each stream, which tells the
	// model's END of one of them alone from the end of the stream;
	// endsAlone is its endsAlone, bound once.
	calls     consumerCalls
	endsAlone func(stream, call string) bool
}

// cutLimit bounds routerLogic.cut, whose entries are removed at their
// stream's END or ERROR; the ones no END removes go, oldest first, once
// there are more. An entry evicted while its stream is still open (more
// than cutLimit streams cancelled at once) only changes how a call that
// stream's end cuts short is answered: invalid arguments rather than
// cancelled.
const cutLimit = 256

func newRouterLogic(all []*Tool, b BreakerOptions) *routerLogic {
	r := &routerLogic{d: newDispatcher(all, b, func(c actors.WrapperContext, _, result *messages.Frame) {
		c.ToInner(result)
	})}
	r.endsAlone = r.calls.endsAlone
	return r
}

// Start implements actors.WrapperStarter.
func (r *routerLogic) Start(c actors.WrapperContext) { r.d.start(c) }

// Request implements actors.Wrapped.
func (r *routerLogic) Request(c actors.WrapperContext, f *messages.Frame) {
	switch t := f.GetType(); t {
	case messages.FrameType_META:
	case messages.FrameType_CANCEL, messages.FrameType_ABORT:
		r.d.cancel(c, f)
		take := r.asm.Pending.Apply
		if r.take != nil {
			take = func(e Event) { r.take(c, e) }
		}
		cancelAssembling(c, &r.asm, r.d, f, take)
		if abort := f.GetType() == messages.FrameType_ABORT; abort || f.GetToolCallId() == "" {
			r.noteCut(f.GetStreamId(), abort)
		}
	default:
		if actors.OpensStream(t) {
			r.calls.note(f)
		}
	}
	if r.install != nil {
		r.install(c, f)
		return
	}
	c.ToInner(f)
}

// noteCut remembers that a CANCEL of all of stream, or an ABORT of it,
// went towards inner (see routerLogic.cut).
func (r *routerLogic) noteCut(stream string, abort bool) {
	if was, ok := r.cut[stream]; ok {
		r.cut[stream] = was || abort
		return
	}
	if r.cut == nil {
		r.cut = map[string]bool{}
	}
	if len(r.cutOrder) == cutLimit {
		delete(r.cut, r.cutOrder[0])
		r.cutOrder = append(r.cutOrder[:0], r.cutOrder[1:]...)
	}
	r.cut[stream] = abort
	r.cutOrder = append(r.cutOrder, stream)
}

// Response implements actors.Wrapped.
func (r *routerLogic) Response(c actors.WrapperContext, f *messages.Frame) {
	e, decisions := r.asm.decide(f, r.endsAlone)
	r.asm.Pending.Apply(e)
	r.act(c, f, decisions)
}

// act carries out the decisions about one response frame, f, and notes
// what it passes out as its runtime notes it (see consumerCalls.emitted):
// the streams the model opens, and the end of a stream, or of one of the
// consumer's calls there, that f may be. An END the router keeps in (a
// durable router's on a closed stream) ends nothing for the runtime,
// which never sees it, nor for the router; nor does a frame the runtime
// drops (see actors.WrapperContext.ToOuterPassed): the model's frames on
// a call a supervisor's Resume answered, say.
func (r *routerLogic) act(c actors.WrapperContext, f *messages.Frame, decisions []Decision) {
	t := f.GetType()
	stream, call := f.GetStreamId(), f.GetToolCallId()
	// The consumer's call, or stream, is open until the model's END: an
	// ERROR leaves it open, as it does for the runtime, whose answer to
	// one call of several is an ERROR and an END of its id.
	ends := (t == messages.FrameType_END || t == messages.FrameType_ERROR) &&
		(call == "" || !r.calls.endsAlone(stream, call))
	for _, d := range decisions {
		switch d.Kind {
		case Run:
			r.d.run(c, d.Frame)
		case Reject: // at the end of the stream (END or ERROR)
			if abort, ok := r.cut[d.Frame.GetStreamId()]; ok {
				r.d.deliver(c, d.Frame, cutShort(d.Frame, abort))
				continue
			}
			r.d.reject(c, d.Frame, d.Message)
		default:
			if c.ToOuterPassed(d.Frame) {
				r.calls.emitted(d.Frame)
			}
		}
	}
	if !ends {
		return
	}
	if _, ok := r.cut[stream]; ok {
		delete(r.cut, stream)
		r.cutOrder = slices.DeleteFunc(r.cutOrder, func(id string) bool { return id == stream })
	}
}

// HandleMessage implements actors.MessageHandler. The END a supervisor's
// Resume emitted in the router's stead, answering one of the consumer's
// calls, ends that call, or its stream, as the END of the router's own
// (see consumerCalls.resumeAnswered).
func (r *routerLogic) HandleMessage(c actors.WrapperContext, msg any) {
	if a, ok := msg.(actors.ResumeAnswered); ok {
		r.calls.resumeAnswered(a)
		return
	}
	r.d.handle(c, msg)
}

// runnerDefaultName is the default name of call runners.
const runnerDefaultName = "tool-runner"

// NewCallRunner returns the spec of a router for calls made outside any
// model (a host's request handler, an MCP server): each TOOL_CALL written
// into it (atomic, or streaming once complete) is run as a router runs a
// model's call — arguments validated, Sync tools inline in its turn, the
// others on their tool actors, behind the circuit breaker — and its one
// TOOL_RESULT is emitted on the call's stream. A CANCEL (of the call it
// names, or of every call of its stream when it names none) and an ABORT
// (of every call of its stream) cancel the calls they concern: one
// running gets its cancelled result from its tool, and one still
// receiving its arguments gets a cancelled result at once and is
// forgotten, so that it never runs and what more of it comes (chunks,
// completion) is dropped. Other frames are dropped.
//
// The runner closes a stream with END once it owes it nothing: after the
// result that leaves none of the stream's calls running or receiving
// arguments, or, with nothing of the stream running, when the caller ends
// it (END or ERROR), cancels or aborts it (CANCEL, ABORT), or sends an
// argument chunk or the completion of a call the runner does not know
// (the rest of a call it answered when it was cancelled or failed: the
// stream is closed after each such frame, since the caller may send
// nothing more of it). A caller that sends another call on the
// stream later opens it again and gets another END after that call's
// result. So a long-lived runner keeps nothing per stream it has
// answered.
//
// A caller should therefore stop sending a call once it has the call's
// result: each argument chunk or completion of it sent after a cancelled
// or failed result is dropped and, when nothing else of the stream is
// running, closes the stream with an END of its own. A caller that goes
// on sending must expect one END per such frame; one that then reuses the
// stream id for its next call and reads it with [actors.Conn.RecvStream]
// may otherwise take such a stale END for the end of that call.
//
// When the runner fails, every call it was running or assembling is
// answered with an error result (FailureStopped) before the runtime
// restarts it; what of such a call reaches the restarted runner later (its
// argument chunks, its completion) is dropped, and it gets no second
// result. Handlers given as a map run asynchronously; Durability is not
// taken.
//
// It does what a router around a duplex that reflects calls and results
// does, without the two trips through that duplex per call.
func NewCallRunner(o *RouterOptions) (actors.Spec, error) {
	opts, all, err := o.prepare(nil, runnerDefaultName, false)
	if err != nil {
		return actors.Spec{}, err
	}
	none := actors.Duplex(opts.Name+"-none", func(*messages.Frame, func(*messages.Frame)) {})
	spec := actors.Wrap(opts.Name, none, func() actors.Wrapped {
		r := &callRunner{open: map[string]struct{}{}}
		r.d = newDispatcher(all, opts.Breaker, func(c actors.WrapperContext, _, result *messages.Frame) {
			c.ToOuter(result)
			if r.stepping {
				// Answered while Request still hands out a frame's
				// decisions: the stream's other decisions may be
				// results too, so it is closed once they are out.
				r.answered = append(r.answered, result.GetStreamId())
				return
			}
			r.closeIfDone(c, result.GetStreamId())
		})
		r.d.countStreams()
		return r
	})
	spec.Supervision = opts.Supervision
	return spec, nil
}

// callRunner is the Wrapped of NewCallRunner: calls come on the request
// path, results go out; the inner duplex is never written to.
type callRunner struct {
	d   *dispatcher
	asm Assembler
	// open holds the streams that a frame opened (actors.OpensStream)
	// and that the runner has not closed with END yet.
	open map[string]struct{}
	// stepping is set while Request hands out the decisions of one
	// frame; answered collects the streams of the results delivered
	// meanwhile. An END or ERROR from the caller takes all of a stream's
	// assembling calls out of the Assembler at once, before their
	// rejections are delivered: closing the stream at the first of them
	// would put END before the others.
	stepping bool
	answered []string
}

// Start implements actors.WrapperStarter.
func (r *callRunner) Start(c actors.WrapperContext) { r.d.start(c) }

// HandleMessage implements actors.MessageHandler.
func (r *callRunner) HandleMessage(c actors.WrapperContext, msg any) { r.d.handle(c, msg) }

// Request implements actors.Wrapped.
func (r *callRunner) Request(c actors.WrapperContext, f *messages.Frame) {
	stream := f.GetStreamId()
	switch f.GetType() {
	case messages.FrameType_CANCEL, messages.FrameType_ABORT:
		r.d.cancel(c, f)
		cancelAssembling(c, &r.asm, r.d, f, r.asm.Pending.Apply)
		r.closeIfDone(c, stream)
		return
	}
	if stream != "" && actors.OpensStream(f.GetType()) {
		r.open[stream] = struct{}{}
	}
	r.stepping = true
	for _, d := range r.asm.Step(f) {
		switch d.Kind {
		case Run:
			r.d.run(c, d.Frame)
		case Reject:
			r.d.reject(c, d.Frame, d.Message)
		}
	}
	r.stepping = false
	for _, s := range r.answered {
		r.closeIfDone(c, s)
	}
	r.answered = r.answered[:0]
	switch {
	case f.GetType() == messages.FrameType_END, f.GetType() == messages.FrameType_ERROR, f.IsToolComplete():
		// The caller is done with the stream, or with a call of it: a
		// frame dropped (one of a call the runner no longer knows) may
		// have opened it.
		r.closeIfDone(c, stream)
	case f.IsToolArgChunk() && !r.asm.Pending.Has(stream, f.GetToolCallId()):
		// A chunk dropped, of a call the runner no longer knows: it
		// opened the stream, and the caller, which has that call's
		// result, may send nothing more of it.
		r.closeIfDone(c, stream)
	}
}

// cancelAssembling answers the calls of f's stream whose arguments are
// still arriving and that the CANCEL or ABORT f concerns (a CANCEL with a
// call id: that call; otherwise all of them) with a cancelled result, once:
// take removes each from asm's pending calls (as its completion would,
// without running it) before its result is delivered, so what more of it
// comes (chunks, completion, the end of its stream) is dropped, as the
// rest of a call that is not pending. A durable router's take persists
// the removal first.
func cancelAssembling(c actors.WrapperContext, asm *Assembler, d *dispatcher, f *messages.Frame, take func(Event)) {
	stream := f.GetStreamId()
	if asm.Pending.InStream(stream) == 0 {
		return
	}
	abort := f.GetType() == messages.FrameType_ABORT
	id := f.GetToolCallId()
	if abort {
		id = ""
	}
	for _, pc := range asm.Pending.inStream(stream) {
		if id != "" && pc.ToolCallID != id {
			continue
		}
		call := pc.frame()
		take(Event{Kind: EventCallCompleted, StreamID: stream, ToolCallID: pc.ToolCallID})
		d.deliver(c, call, cutShort(call, abort))
	}
}

// cutShort is the result of a streaming call whose arguments a CANCEL
// (abort false) or an ABORT cut short: cancelled, not invalid arguments,
// since the call was not wrong, only stopped.
func cutShort(call *messages.Frame, abort bool) *messages.Frame {
	why := "cancelled"
	if abort {
		why = "aborted"
	}
	return errorResult(call, FailureCancelled, fmt.Sprintf(
		"Tool call %s was %s before its arguments were complete", call.GetName(), why))
}

// closeIfDone emits END on stream when the runner opened it and nothing
// of it is running: no call outstanding, none assembling.
func (r *callRunner) closeIfDone(c actors.WrapperContext, stream string) {
	if _, ok := r.open[stream]; !ok || r.d.inStream(stream) > 0 || r.asm.Pending.InStream(stream) > 0 {
		return
	}
	delete(r.open, stream)
	c.ToOuter(messages.End(stream))
}

// Response implements actors.Wrapped: the inner duplex emits nothing.
func (r *callRunner) Response(actors.WrapperContext, *messages.Frame) {}

// OnFailure implements actors.WrapperFailureHandler: the calls running,
// and those whose arguments are still arriving, get their error results,
// since a restarted runner knows none of them. The streams still open are
// closed by the runtime (ERROR and END).
func (r *callRunner) OnFailure(c actors.WrapperContext, err error) {
	for _, o := range r.d.forget() {
		c.ToOuter(errorResult(o.call, FailureStopped, fmt.Sprintf("Tool %s stopped: the tool runner failed: %v", o.call.GetName(), err)))
	}
	for _, pc := range r.asm.Pending.Snapshot() {
		c.ToOuter(errorResult(pc.frame(), FailureStopped, fmt.Sprintf(
			"Tool %s stopped before its arguments were complete: the tool runner failed: %v", pc.Name, err)))
	}
	r.asm = Assembler{}
	clear(r.open)
}
