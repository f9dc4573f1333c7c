package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/internal/onemap"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// Defaults of [LoopOptions].
const (
	DefaultMaxIterations     = 3
	DefaultFinalSystemPrompt = "Answer directly using the tool result. Do not call tools."
)

// LoopOptions configure [NewLoop]. A nil *LoopOptions or a zero field
// means the default; options are copied.
type LoopOptions struct {
	// Name is the loop actor's name; default "tool-loop". Tools,
	// Handlers (run async), Breaker and Supervision as for routers.
	RouterOptions
	// ToolsParam, ToolChoice and SystemPrompt as for [InstallerOptions].
	ToolsParam   json.RawMessage
	ToolChoice   json.RawMessage
	SystemPrompt string
	// MaxIterations is the number of tool rounds per stream after which
	// the follow-up carries FinalSystemPrompt; default 3.
	MaxIterations int
	// FinalSystemPrompt is appended as a system message to the follow-up
	// of round MaxIterations; default [DefaultFinalSystemPrompt].
	FinalSystemPrompt string
	// OnToolResult, when set, is called once per call with its result, in
	// call order, on the loop actor's goroutine: it must be quick and must
	// not block (hand slow work to a goroutine or channel of your own). It
	// hears the results the loop gives when the model ends a stream with
	// ERROR too (cancelled or stopped calls), not those the failure of the
	// loop actor itself gives. A panic in it fails the loop actor like any
	// panic in its logic: the calls not yet reported get error results
	// and the open streams end with ERROR and END.
	OnToolResult func(ToolResultEvent)
	// Session, when set, persists the conversation at each step so that
	// it can be resumed after a crash or in a new process (see
	// [SessionOptions]). Nil keeps it in memory only.
	Session *SessionOptions
	// Approval, when set, holds back the calls its policy asks about
	// until a person answers (see [ApprovalOptions]).
	Approval *ApprovalOptions
}

// ToolResultEvent is what [LoopOptions.OnToolResult] receives.
type ToolResultEvent struct {
	StreamID string
	// Iteration is the tool round, from 1.
	Iteration int
	// Call is the TOOL_CALL with complete arguments; Result its TOOL_RESULT.
	Call   *messages.Frame
	Result *messages.Frame
}

// NewLoop returns the spec of a tool loop around inner (the model adapter,
// see the package doc for the contract). Per stream:
//
//   - Request path: PARAM frames are remembered (by name) and passed on.
//     The first "messages" PARAM of a stream is preceded by the "tools" and
//     "tool_choice" PARAMs and gets SystemPrompt prepended. END passes
//     on; CANCEL and ABORT pass on while the model has a request of the
//     stream open, not once its response ended and its calls run (a model
//     with nothing open ignores them: see models, Cancellation; the loop
//     alone acts on them then). CANCEL and ABORT also cancel the stream's
//     running tool calls they concern and stop the loop for that stream: the
//     calls of the response without a result are answered as cancelled
//     (FailureCancelled). A CANCEL of the whole stream and an ABORT stop
//     the model too, so the calls whose arguments its end of the
//     response cuts short are answered as cancelled as well (not as
//     invalid arguments). After ERROR (model adapters answer a CANCEL or
//     ABORT so) the stream ends with that ERROR and END after the
//     results. With a Session the CANCEL or ABORT is stored before the
//     loop acts on it, those are the results the session keeps, and the
//     session stays resumable however the stream ended: resumed, it
//     gives those calls the same results, runs none of them and carries
//     on (see [SessionOptions]). A CANCEL naming a call does not stop
//     the model: a call it then leaves incomplete is answered as invalid
//     arguments.
//     CANCEL and ABORT for a stream with nothing in flight change nothing
//     (a stream id used again later starts clean).
//   - Response path: the loop collects the TOOL_CALLs of one model
//     response (atomic, or streaming ones once complete) until the
//     response's END, then runs them all (in parallel unless Sync) and,
//     once every call has its result, sends the follow-up request into
//     inner: the remembered PARAMs other than messages/tools/tool_choice,
//     then tools, tool_choice, and messages extended with the assistant
//     message (content: the response's text or null, tool_calls as
//     accumulated) and one {"role":"tool","tool_call_id","content"}
//     message per call in call order (content: the result JSON as a
//     string), then END. The follow-up of round MaxIterations also ends
//     the messages with a system message FinalSystemPrompt; calls the
//     model makes after that are not run (error results,
//     FailureLimit) and the stream ends.
//   - A call the length limit cut off (a META models.MetaTruncatedCall
//     frame) is closed as failed (FailureTruncated, with
//     models.TruncatedCallError's text) and never run; the follow-up
//     carries it with {} as its arguments and that result, so the model
//     learns it and decides. META thinking_blocks are sent back in the
//     assistant message of the follow-up.
//
// What the outer consumer receives for a stream, in order: every TEXT the
// model produced (also text that precedes tool calls), each TOOL_CALL as
// one atomic frame with its complete arguments when the model makes it,
// then the TOOL_RESULTs of that round in call order, the model's META
// frames (usage...) as they come, and finally END — or ERROR then END
// when the model failed (calls already surfaced then get error results
// first). Every TOOL_CALL the consumer sees is followed by exactly one
// TOOL_RESULT with its id. The END comes once the loop holds nothing of
// the stream any more (after the model's ERROR, with the model's END):
// a new request may use the stream id as soon as the END is out. The loop is the outermost tool stage: wrapping
// it in a router would run the surfaced calls again.
func NewLoop(inner actors.Spec, o *LoopOptions) (actors.Spec, error) {
	var opts LoopOptions
	if o != nil {
		opts = *o
	}
	ropts, all, err := opts.RouterOptions.prepare(&inner, "tool-loop", false)
	if err != nil {
		return actors.Spec{}, err
	}
	switch {
	case opts.MaxIterations < 0:
		return actors.Spec{}, fmt.Errorf("loop %q: negative max iterations", ropts.Name)
	case opts.MaxIterations == 0:
		opts.MaxIterations = DefaultMaxIterations
	}
	if opts.FinalSystemPrompt == "" {
		opts.FinalSystemPrompt = DefaultFinalSystemPrompt
	}
	if len(opts.ToolChoice) > 0 && !json.Valid(opts.ToolChoice) {
		return actors.Spec{}, fmt.Errorf("loop %q: tool choice is not JSON", ropts.Name)
	}
	var session SessionOptions
	var sessionProvider *durability.Provider
	if opts.Session != nil {
		session = *opts.Session
		if err := session.validate(); err != nil {
			return actors.Spec{}, fmt.Errorf("loop %q: %w", ropts.Name, err)
		}
		if sessionProvider, err = session.provider(); err != nil {
			return actors.Spec{}, fmt.Errorf("loop %q: %w", ropts.Name, err)
		}
	}
	approval, err := opts.Approval.prepare()
	if err != nil {
		return actors.Spec{}, fmt.Errorf("loop %q: %w", ropts.Name, err)
	}
	var idempotent, dies map[string]bool // what a session resumes by; nil without one
	if opts.Session != nil {
		idempotent, dies = map[string]bool{}, map[string]bool{}
		for _, t := range all {
			idempotent[t.Name()] = t.def.Idempotent
			dies[t.Name()] = t.def.DiesWithProcess
		}
	}
	opts.ToolsParam = toolsParam(opts.ToolsParam, all)
	if len(opts.ToolsParam) > 0 && !json.Valid(opts.ToolsParam) {
		return actors.Spec{}, fmt.Errorf("loop %q: tools param is not JSON", ropts.Name)
	}
	spec := actors.Wrap(ropts.Name, inner, func() actors.Wrapped {
		l := &loopLogic{opts: opts}
		if opts.SystemPrompt != "" {
			l.system = systemMessage(opts.SystemPrompt)
		}
		l.d = newDispatcher(all, ropts.Breaker, l.delivered)
		l.d.gate = newApprovalGate(approval, opts.Session, all)
		if opts.Session != nil {
			l.sess = &sessionState{opts: session, idempotent: idempotent, diesWithProcess: dies,
				log: newSessionLog(session, sessionProvider)}
		}
		return l
	})
	spec.Supervision = ropts.Supervision
	return spec, nil
}

type loopPhase int

const (
	phaseRequest loopPhase = iota // the outer is sending a request
	phaseModel                    // the model is answering
	phaseTools                    // the tools of a model response are running
	phaseClosed                   // failed; waiting for the model's END to forget
)

// loopSession is the state of one stream.
type loopSession struct {
	stream    string
	phase     loopPhase
	params    []*messages.Frame // PARAMs other than messages/tools/tool_choice
	messages  []json.RawMessage
	injected  bool
	iteration int // tool rounds done
	// cancelled is set by every CANCEL or ABORT: the loop stops after the
	// response. stopped is set by those that stop the model (a CANCEL of
	// the whole stream, an ABORT): the end of its response (END or ERROR)
	// then cuts its calls short because of them. A CANCEL naming a call
	// goes to that call's tool alone, so a call the model leaves
	// incomplete after it is the model's doing.
	cancelled bool
	stopped   bool
	aborted   bool // the stream was cancelled by an ABORT (stopped is set too)
	// endOwed: the model failed the response with ERROR, which went out,
	// and the stream's END goes out with the model's END, once the loop
	// forgets the stream (see fail).
	endOwed bool
	// endAtHold: the loop refused the request before the caller's END
	// came; that END, dropped as the rest of the request, sends the
	// stream's (see fail).
	endAtHold bool

	// The current model response.
	text        responseText
	thinking    json.RawMessage // META thinking_blocks of the response
	calls       []*turnCall
	dispatching bool
	// slab holds the records of calls, reused from round to round.
	slab []turnCall
	// store is the storage of messages, kept from stream to stream when
	// the loop alone holds it (without a Session).
	store []json.RawMessage
	// The frames every request of the stream sends alike, made once.
	toolsFrame, choiceFrame, endFrame *messages.Frame

	// With a Session: the first request's messages payload, and for a
	// request held back (refused, or resuming at its END) the state to
	// resume.
	first  []byte
	hold   bool
	resume *messages.LoopSession
}

// responseText gathers the TEXT of a model response. A response sends
// its text in one frame or none more often than in many: one piece is
// kept as it came, not copied; once a second comes they are joined.
type responseText struct {
	one  string          // the only piece so far
	more strings.Builder // every piece, once there were two
}

func (t *responseText) WriteString(s string) {
	switch {
	case s == "":
	case t.more.Len() > 0:
		t.more.WriteString(s)
	case t.one == "":
		t.one = s
	default:
		t.more.WriteString(t.one)
		t.more.WriteString(s)
		t.one = ""
	}
}

// String returns the text so far.
func (t *responseText) String() string {
	if t.more.Len() > 0 {
		return t.more.String()
	}
	return t.one
}

// Reset forgets the text.
func (t *responseText) Reset() {
	t.one = ""
	t.more.Reset()
}

type turnCall struct {
	call   *messages.Frame
	result *messages.Frame
	sent   bool // the result went to the consumer
}

type loopLogic struct {
	opts LoopOptions
	d    *dispatcher
	asm  Assembler
	// sessions by stream: a loop mostly serves one stream at a time,
	// which onemap keeps out of its Go map.
	sessions onemap.Map[loopSession]
	sess     *sessionState // nil without a Session
	// system is SystemPrompt's message, encoded once (nil without one).
	system json.RawMessage

	// roundCalls and roundResults are the scratch lists of a round's
	// calls and results, kept for the next round.
	roundCalls, roundResults []*messages.Frame
	// spare is the storage of a forgotten stream's session, for the next
	// stream (a loop usually serves one stream after the other).
	spare *loopSession
}

// commit persists the events of a step of s's session (with a Session),
// before the loop acts on it.
func (l *loopLogic) commit(c actors.Context, s *loopSession, events ...proto.Message) {
	if l.sess != nil {
		l.sess.commit(c, s, events...)
	}
}

// record queues an event of s's session (with a Session) that makes the
// loop do nothing yet; it is written with the next step.
func (l *loopLogic) record(c actors.Context, s *loopSession, e proto.Message) {
	if l.sess != nil {
		l.sess.record(c, s, e)
	}
}

func (l *loopLogic) session(stream string) *loopSession {
	s, ok := l.lookup(stream)
	if !ok {
		if s, l.spare = l.spare, nil; s == nil {
			s = &loopSession{}
		}
		s.stream = stream
		l.sessions.Add(stream, s)
	}
	return s
}

// lookup returns the session of stream, if it has one.
func (l *loopLogic) lookup(stream string) (*loopSession, bool) { return l.sessions.Get(stream) }

// drop removes s from the sessions.
func (l *loopLogic) drop(s *loopSession) { l.sessions.Delete(s.stream) }

// all returns every session.
func (l *loopLogic) all() []*loopSession { return l.sessions.Values() }

// forget drops the session of s's stream, which is over, keeping its
// storage for the next stream: nothing may use s afterwards.
func (l *loopLogic) forget(s *loopSession) {
	l.drop(s)
	s.clearCalls()
	var store []json.RawMessage
	if l.sess == nil { // else the messages may be the session record's
		store = s.messages
		clear(store)
	}
	*s = loopSession{calls: s.calls, slab: s.slab, store: store[:0]}
	l.spare = s
}

// addCall appends a call of the current response; its record comes from
// the session's slab.
func (s *loopSession) addCall(call, result *messages.Frame) {
	if len(s.slab) == cap(s.slab) {
		// Records handed out stay where they are, in the old slab.
		s.slab = make([]turnCall, 0, max(4, 2*cap(s.slab)))
	}
	s.slab = append(s.slab, turnCall{call: call, result: result})
	s.calls = append(s.calls, &s.slab[len(s.slab)-1])
}

// clearCalls forgets the calls of the response, keeping their storage.
func (s *loopSession) clearCalls() {
	clear(s.calls)
	clear(s.slab)
	s.calls, s.slab = s.calls[:0], s.slab[:0]
}

// Start implements actors.WrapperStarter.
func (l *loopLogic) Start(c actors.WrapperContext) {
	l.d.start(c)
	if l.sess != nil {
		l.sess.load(c)
	}
}

// HandleMessage implements actors.MessageHandler.
func (l *loopLogic) HandleMessage(c actors.WrapperContext, msg any) { l.d.handle(c, msg) }

// Request implements actors.Wrapped.
func (l *loopLogic) Request(c actors.WrapperContext, f *messages.Frame) {
	if l.approvalAnswer(c, f) {
		return
	}
	if t := f.GetType(); t == messages.FrameType_CANCEL || t == messages.FrameType_ABORT {
		if _, ok := l.lookup(f.GetStreamId()); !ok {
			return // nothing in flight on the stream: nothing to cancel, nothing to remember
		}
	}
	s := l.session(f.GetStreamId())
	if s.hold { // refused, or resuming at END: nothing goes to the model
		switch f.GetType() {
		case messages.FrameType_CANCEL, messages.FrameType_ABORT:
			if st := s.resume; st != nil && st.GetPhase() != messages.LoopPhase_LOOP_PHASE_DONE {
				// Stored before the resume acts on it: the stored calls it
				// covers are answered as cancelled, none of them runs.
				if e := l.storeCancel(c, s, f); e != nil {
					st.Cancel = joinCancel(st.GetCancel(), e)
				}
				s.noteCancel(f)
			}
		case messages.FrameType_END:
			s.hold = false
			if st := s.resume; st != nil {
				s.resume = nil
				l.resume(c, s, st)
				return
			}
			owed, end := s.endAtHold, s.end()
			l.forget(s) // before the END: the stream may be used again once it is out
			if owed {
				c.ToOuter(end)
			}
		}
		return
	}
	switch f.GetType() {
	case messages.FrameType_PARAM:
		if f.IsParam(models.ParamMessages) {
			l.requestMessages(c, s, f)
			return
		}
		if f.GetName() != models.ParamTools && f.GetName() != models.ParamToolChoice {
			s.setParam(f)
		}
	case messages.FrameType_END:
		if s.endFrame == nil && bareEnd(f) {
			s.endFrame = f // sent again with the follow-ups, and outward at the end
		}
		if s.phase == phaseRequest {
			s.phase = phaseModel
			if l.sess != nil && l.sess.active == s.stream {
				l.commit(c, s, s.startedEvent(l.sess.opts.ID))
			}
		}
	case messages.FrameType_CANCEL, messages.FrameType_ABORT:
		if s.phase == phaseModel || s.phase == phaseTools {
			// Stored before the calls and the model hear of it: a session
			// resumed after a stop never runs a call the caller cancelled.
			l.storeCancel(c, s, f)
		}
		s.noteCancel(f)
		l.d.cancel(c, f)
		if s.phase == phaseTools {
			// The model's response ended: it has nothing open on the
			// stream and would ignore the CANCEL or ABORT (see models,
			// Cancellation). It is for the tools alone, so that nothing
			// of it reaches the model and no late answer to it can meet
			// the stream's next request.
			return
		}
	}
	c.ToInner(f)
}

// noteCancel marks s cancelled by the caller's CANCEL or ABORT f.
func (s *loopSession) noteCancel(f *messages.Frame) {
	s.cancelled = true
	s.aborted = s.aborted || f.GetType() == messages.FrameType_ABORT
	s.stopped = s.stopped || s.aborted || f.GetToolCallId() == ""
}

// storeCancel stores the caller's CANCEL or ABORT f of s's response in
// s's session, if it runs one, and returns the event stored: nil when
// there is none, or when f changes nothing the session keeps (a CANCEL
// or ABORT repeated, a CANCEL naming a call the ended response did not
// make), which costs no write.
func (l *loopLogic) storeCancel(c actors.WrapperContext, s *loopSession, f *messages.Frame) *messages.LoopCancelled {
	if l.sess == nil || l.sess.active != s.stream {
		return nil
	}
	e := &messages.LoopCancelled{Abort: f.GetType() == messages.FrameType_ABORT}
	if !e.Abort {
		e.ToolCallId = f.GetToolCallId()
	}
	old := l.sess.log.rec.cancel
	if proto.Equal(joinCancel(old, e), old) || (s.phase == phaseTools && e.ToolCallId != "" && !s.hasCall(e.ToolCallId)) {
		return nil
	}
	l.commit(c, s, e)
	return e
}

func (s *loopSession) setParam(f *messages.Frame) {
	for i, p := range s.params {
		if p.GetName() == f.GetName() {
			s.params[i] = f
			return
		}
	}
	s.params = append(s.params, f)
}

func (l *loopLogic) requestMessages(c actors.WrapperContext, s *loopSession, f *messages.Frame) {
	var list []json.RawMessage
	var err error
	if l.sess == nil && !s.injected {
		// The loop alone holds the list: into the storage of the streams
		// before, with room for the system prompt in front.
		list = s.store[:0]
		if l.system != nil {
			list = append(list, l.system)
		}
		list, err = models.AppendSplitMessages(list, f.GetPayload())
	} else {
		list, err = models.SplitMessages(f.GetPayload())
	}
	if err != nil {
		l.fail(c, s, fmt.Sprintf("tool loop: %v", err), models.FailurePermanent, false)
		return
	}
	if s.injected {
		s.messages = list
		c.ToInner(f)
		return
	}
	if l.sess != nil && !l.sess.admit(c, l, s, f.GetPayload()) {
		return
	}
	out := f // the model gets the messages as they came: the frame is immutable
	switch {
	case l.system != nil && l.sess == nil: // the system message is in front already
		out = messages.RawParam(s.stream, models.ParamMessages, models.JoinMessages(list))
	case l.system != nil:
		list = append([]json.RawMessage{l.system}, list...)
		out = messages.RawParam(s.stream, models.ParamMessages, models.JoinMessages(list))
	case len(list) == 0: // null or [] sent on as []
		out = messages.RawParam(s.stream, models.ParamMessages, models.JoinMessages(list))
	}
	s.injected = true
	s.messages = list
	l.sendTools(c, s)
	c.ToInner(out)
}

// bareEnd reports whether f is an END frame with nothing but its stream
// id, which the loop can send again in its own name.
func bareEnd(f *messages.Frame) bool {
	return f.GetToolCallId() == "" && f.GetName() == "" && len(f.GetPayload()) == 0 && f.GetText() == "" &&
		f.GetMeta() == nil && len(f.ProtoReflect().GetUnknown()) == 0
}

// end returns the END frame of s's stream, made once per stream (or the
// outer's own, see bareEnd): frames are immutable once sent.
func (s *loopSession) end() *messages.Frame {
	if s.endFrame == nil {
		s.endFrame = messages.End(s.stream)
	}
	return s.endFrame
}

// sendTools sends the tools and tool_choice PARAMs of s's requests. The
// frames are made once per stream and sent with each of its requests:
// frames are immutable once sent.
func (l *loopLogic) sendTools(c actors.WrapperContext, s *loopSession) {
	if len(l.opts.ToolsParam) > 0 {
		if s.toolsFrame == nil {
			s.toolsFrame = messages.RawParam(s.stream, models.ParamTools, l.opts.ToolsParam)
		}
		c.ToInner(s.toolsFrame)
	}
	if len(l.opts.ToolChoice) > 0 {
		if s.choiceFrame == nil {
			s.choiceFrame = messages.RawParam(s.stream, models.ParamToolChoice, l.opts.ToolChoice)
		}
		c.ToInner(s.choiceFrame)
	}
}

// Response implements actors.Wrapped.
func (l *loopLogic) Response(c actors.WrapperContext, f *messages.Frame) {
	s, ok := l.lookup(f.GetStreamId())
	if !ok {
		if t := f.GetType(); t == messages.FrameType_END || t == messages.FrameType_ERROR {
			// The end of a response the loop does not wait for: the
			// model has no request of the stream open (the loop passes
			// no CANCEL or ABORT to a model with nothing open, so an
			// adapter following the models contract never sends one).
			// Dropped, as the stream ended outward already; a stream id
			// used again may still meet one that comes later.
			c.Logger().Warn("model ended a response that was not open; dropped", "stream", f.GetStreamId(), "type", t.String(), "text", f.GetText())
			l.asm.Step(f) // keep the assembler's state clean
			return
		}
		s = l.session(f.GetStreamId())
	}
	if s.phase == phaseClosed {
		l.asm.Step(f) // keep the assembler's state clean
		switch t := f.GetType(); {
		case t == messages.FrameType_END && s.endOwed:
			end := s.end()
			l.forget(s) // before the END: the stream may be used again once it is out
			c.ToOuter(end)
		case t == messages.FrameType_END, t == messages.FrameType_ERROR && !s.endOwed:
			l.forget(s)
		}
		return
	}
	if l.sess != nil {
		switch pending := l.asm.Pending.Has(f.GetStreamId(), f.GetToolCallId()); {
		case f.IsStreamingToolCall() && !pending:
			l.record(c, s, &messages.LoopCallStarted{ToolCallId: f.GetToolCallId(), Name: f.GetName(), Index: f.GetMeta().GetIndex()})
		case f.IsToolArgChunk() && pending:
			l.sess.recordArgs(c, s, f.GetToolCallId(), f.GetText())
		}
	}
	decisions := l.asm.Step(f)
	for _, d := range decisions {
		if d.Kind != Pass && s.hasCall(d.Frame.GetToolCallId()) {
			c.Logger().Warn("tool call id repeated in one response; dropped", "tool_call_id", d.Frame.GetToolCallId())
			continue
		}
		switch d.Kind {
		case Run:
			s.addCall(d.Frame, nil)
			if l.sess != nil {
				l.commit(c, s, surfacedEvent(f, d.Frame, nil))
			}
			c.ToOuter(d.Frame)
		case Reject:
			result := errorResult(d.Frame, FailureInvalidArguments, d.Message)
			if s.stopped { // the stream ended because it was cancelled: the call was not wrong
				result = cutShort(d.Frame, s.aborted)
			}
			s.addCall(d.Frame, result)
			if l.sess != nil {
				l.commit(c, s, surfacedEvent(f, d.Frame, result))
			}
			c.ToOuter(d.Frame)
		default:
			l.pass(c, s, d.Frame)
		}
	}
}

func (s *loopSession) hasCall(id string) bool {
	for _, tc := range s.calls {
		if tc.call.GetToolCallId() == id {
			return true
		}
	}
	return false
}

func (l *loopLogic) pass(c actors.WrapperContext, s *loopSession, f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TEXT:
		s.text.WriteString(f.GetText())
		if l.sess != nil {
			l.record(c, s, &messages.LoopText{Text: f.GetText()})
		}
		c.ToOuter(f)
	case messages.FrameType_ERROR:
		// The model's END that follows ends the stream. A failure the
		// model says is permanent stays so: the consumer does not retry.
		var kind FailureKind
		if f.GetMeta().GetFailureKind() == models.FailurePermanent {
			kind = models.FailurePermanent
		}
		l.fail(c, s, f.GetText(), kind, true)
	case messages.FrameType_END:
		l.endOfResponse(c, s)
	case messages.FrameType_META:
		switch f.GetName() {
		case models.MetaTruncatedCall:
			l.truncated(c, s, f)
			return
		case models.MetaThinkingBlocks:
			s.thinking = f.GetPayload()
		}
		c.ToOuter(f)
	default:
		c.ToOuter(f)
	}
}

// truncated closes a call the length limit cut off: the consumer sees it
// (with {} as its arguments) and its failed result, the follow-up tells
// the model, and nothing of it runs.
func (l *loopLogic) truncated(c actors.WrapperContext, s *loopSession, f *messages.Frame) {
	tc, err := models.ReadTruncatedCall(f)
	if err != nil || s.hasCall(f.GetToolCallId()) {
		c.Logger().Warn("malformed or repeated truncated call dropped", "tool_call_id", f.GetToolCallId(), "error", err)
		return
	}
	call := messages.ToolCall(s.stream, f.GetToolCallId(), tc.Name, json.RawMessage("{}"))
	call.Meta = &messages.Metadata{Index: f.GetMeta().GetIndex()}
	result := errorResult(call, FailureTruncated, models.TruncatedCallError(tc.Name, tc.Received))
	s.addCall(call, result)
	l.commit(c, s, &messages.LoopCallSurfaced{ToolCallId: call.GetToolCallId(), Call: call, Result: result})
	c.ToOuter(call)
}

// fail ends the stream outward with ERROR and END; surfaced calls without
// a result get one first: cancelled after a CANCEL or ABORT (the loop
// runs no call of a response the caller cancelled; the model's ERROR
// answers a CANCEL of the stream or an ABORT), else stopped.
//
// With a Session, the events waiting are written before anything goes
// out, with the cancelled results: an ERROR answering the loop's own
// CANCEL or ABORT ends the response as its END would, and a resumed
// session must give those calls the results their consumer got, not run
// them or answer them again (a cancelled round past MaxIterations ends
// the session, as its END would). Stopped results are not kept: the calls
// did not fail, the model did, and a resume runs them or answers them as
// interrupted (see [SessionOptions]).
//
// The ERROR carries kind, if not empty, as its failure kind: what tells a
// consumer whether another attempt can help (see [FailureSessionConflict]
// and models.FailurePermanent).
//
// With modelEnds (the model failed the response with ERROR, and its END
// follows) the stream's END goes out when the model's END comes, as the
// loop forgets the stream: a consumer may send a new request on the
// stream as soon as it has the END, and that request must not meet a
// session still waiting for the old response's end (it would be taken
// into the failed conversation). Otherwise (the loop itself failed the
// request) nothing more of the request goes to the model, its END
// included (the model would answer a request the caller never made, and
// that late answer could meet the stream's next request): the rest of
// the request is dropped, and the stream's END goes out when the
// caller's END comes, as the loop forgets the stream, or at once when it
// had come.
func (l *loopLogic) fail(c actors.WrapperContext, s *loopSession, reason string, kind FailureKind, modelEnds bool) {
	var events []proto.Message // the results to keep, with a Session
	for _, tc := range s.calls {
		switch {
		case tc.result != nil:
		case s.cancelled:
			tc.result = cancelledResult(tc.call, s.aborted, true)
			if l.sess != nil {
				events = append(events, &messages.LoopCallResult{Result: tc.result})
			}
		default:
			tc.result = errorResult(tc.call, FailureStopped, "the model stream failed: "+reason)
		}
	}
	if l.sess != nil && l.sess.active == s.stream {
		if s.cancelled && len(s.calls) > 0 && s.iteration >= l.opts.MaxIterations {
			// The round past the limit, its calls answered: it ends the
			// session, as it does when the model ends it with END.
			events = append(events, &messages.LoopRoundEnded{Done: true, Thinking: s.thinking})
		}
		l.commit(c, s, events...)
		l.sess.active = "" // the stored session stays resumable, unless it ended
	}
	for _, tc := range s.calls {
		if !tc.sent {
			tc.sent = true
			c.ToOuter(tc.result)
			if l.opts.OnToolResult != nil { // the round is not counted: it did not end
				l.opts.OnToolResult(ToolResultEvent{StreamID: s.stream, Iteration: s.iteration + 1, Call: tc.call, Result: tc.result})
			}
		}
	}
	s.clearCalls()
	ef := messages.Error(s.stream, reason)
	if kind != "" {
		ef.Meta = &messages.Metadata{FailureKind: string(kind)}
	}
	c.ToOuter(ef)
	requesting := s.phase == phaseRequest // the caller's END has not come
	s.phase = phaseClosed
	switch {
	case modelEnds:
		s.endOwed = true
	case requesting || s.hold:
		s.hold, s.endAtHold = true, true
	default:
		c.ToOuter(s.end())
	}
}

// endOfResponse runs the calls of the model's response, or ends the
// stream when it made none.
func (l *loopLogic) endOfResponse(c actors.WrapperContext, s *loopSession) {
	if len(s.calls) == 0 {
		if l.sess != nil {
			l.commit(c, s, &messages.LoopAnswered{}) // the final answer
		}
		c.ToOuter(s.end())
		l.forget(s)
		return
	}
	var refused string // why calls are not run: the limit was reached
	if !s.cancelled && s.iteration >= l.opts.MaxIterations {
		refused = fmt.Sprintf("Tool call refused: the limit of %s was reached; answer directly", rounds(l.opts.MaxIterations))
	}
	s.phase = phaseTools
	var events []proto.Message
	if s.cancelled || refused != "" {
		for _, tc := range s.calls {
			if tc.result == nil {
				if s.cancelled {
					tc.result = cancelledResult(tc.call, s.aborted, true)
				} else {
					tc.result = errorResult(tc.call, FailureLimit, refused)
				}
				if l.sess != nil {
					events = append(events, &messages.LoopCallResult{Result: tc.result})
				}
			}
		}
	}
	if l.sess != nil {
		l.commit(c, s, append(events, &messages.LoopToolsStarted{Thinking: s.thinking})...) // the calls start
	}
	s.dispatching = true
	for _, tc := range s.calls {
		if tc.result == nil {
			l.d.run(c, tc.call)
		}
	}
	s.dispatching = false
	l.maybeFinishRound(c, s)
}

// delivered is the dispatcher's answer for one call.
func (l *loopLogic) delivered(c actors.WrapperContext, call, result *messages.Frame) {
	s, ok := l.lookup(call.GetStreamId())
	if !ok {
		return
	}
	for _, tc := range s.calls {
		if tc.call.GetToolCallId() == call.GetToolCallId() && tc.result == nil {
			tc.result = result
			if s.phase == phaseTools && l.sess != nil {
				// A call completed: written by maybeFinishRound, which
				// always follows, with the round's end when it was the
				// last call (one write), else at once.
				l.record(c, s, &messages.LoopCallResult{Result: result})
			}
			break
		}
	}
	if !s.dispatching {
		l.maybeFinishRound(c, s)
	}
}

func (l *loopLogic) maybeFinishRound(c actors.WrapperContext, s *loopSession) {
	if s.phase != phaseTools {
		return
	}
	for _, tc := range s.calls {
		if tc.result == nil {
			l.commit(c, s) // the results that came in
			l.approvalWaiting(c, s)
			return
		}
	}
	limited := s.iteration >= l.opts.MaxIterations
	s.iteration++
	round := s.calls
	done := s.cancelled || limited
	var ended *messages.LoopRoundEnded // the event, with a Session
	var followUp json.RawMessage       // the follow-up's messages, when built with the round
	switch {
	case l.sess != nil && done && !limited:
		// The caller cancelled: the stream ends, but the session stays
		// at this round with its results, and a resume sends the
		// follow-up (see SessionOptions).
		l.sess.release(c, s)
	case l.sess != nil:
		ended = &messages.LoopRoundEnded{Done: done, Thinking: s.thinking}
	}
	if done {
		s.text.Reset()
		s.calls = nil
	} else {
		if l.sess != nil && l.sess.active == s.stream {
			// The session's record builds the follow-up as it applies
			// the event; the loop sends what it built.
			l.commit(c, s, ended)
			s.messages = slices.Clip(l.sess.log.rec.messages)
			ended = nil
		} else {
			calls, results := l.roundCalls[:0], l.roundResults[:0]
			for _, tc := range round {
				calls, results = append(calls, tc.call), append(results, tc.result)
			}
			followUp, s.messages = joinRound(s.messages, s.text.String(), calls, results, s.thinking, l.finalMessage(s))
			clear(calls)
			clear(results)
			l.roundCalls, l.roundResults = calls, results
		}
		s.thinking = nil
		s.text.Reset()
		s.calls = nil
		s.phase = phaseModel
	}
	if ended != nil {
		l.commit(c, s, ended) // the round ended: the follow-up goes out, or the session ends
	}
	// Until every result is out, OnFailure must still see the round (a
	// hook may panic).
	s.calls = round
	for _, tc := range round {
		tc.sent = true
		c.ToOuter(tc.result)
		if l.opts.OnToolResult != nil {
			l.opts.OnToolResult(ToolResultEvent{StreamID: s.stream, Iteration: s.iteration, Call: tc.call, Result: tc.result})
		}
	}
	s.clearCalls()
	if done {
		c.ToOuter(s.end())
		l.forget(s)
		return
	}
	l.sendRequest(c, s, followUp)
}

// sendRequest sends the stream's request to the model: the remembered
// PARAMs, tools, tool_choice, the messages (with the final system prompt
// once the rounds are used up) and END. payload is the messages' JSON
// array when the caller built it already, else nil: it is joined from
// s.messages.
func (l *loopLogic) sendRequest(c actors.WrapperContext, s *loopSession, payload json.RawMessage) {
	if payload == nil {
		list := s.messages
		if final := l.finalMessage(s); final != nil {
			list = append(list[:len(list):len(list)], final)
		}
		payload = models.JoinMessages(list)
	}
	for _, p := range s.params {
		c.ToInner(p)
	}
	l.sendTools(c, s)
	c.ToInner(messages.RawParam(s.stream, models.ParamMessages, payload))
	c.ToInner(s.end())
}

// finalMessage is the message of the final system prompt when s's rounds
// are used up (its next request is its last), else nil: both ways of
// building a follow-up append it.
func (l *loopLogic) finalMessage(s *loopSession) json.RawMessage {
	if s.iteration < l.opts.MaxIterations {
		return nil
	}
	return systemMessage(l.opts.FinalSystemPrompt)
}

// OnFailure implements actors.WrapperFailureHandler: calls surfaced to the
// consumer get their error results before the runtime closes the streams
// with ERROR and END: stopped, or, with a Session, cancelled when the
// caller's stored CANCEL or ABORT covers them, as a resume answers them.
func (l *loopLogic) OnFailure(c actors.WrapperContext, err error) {
	for _, s := range l.all() {
		var rec *sessionRecord // the stored session of s, if it runs one
		if l.sess != nil && l.sess.active == s.stream {
			rec = &l.sess.log.rec
		}
		for _, tc := range s.calls {
			switch {
			case tc.result != nil:
			case rec != nil && cancels(rec.cancel, tc.call.GetToolCallId(), true, rec.phase == messages.LoopPhase_LOOP_PHASE_TOOLS):
				tc.result = cancelledResult(tc.call, rec.cancel.GetAborted(), true)
			default:
				tc.result = errorResult(tc.call, FailureStopped, fmt.Sprintf("tool loop stopped: %v", err))
			}
			if !tc.sent {
				tc.sent = true
				c.ToOuter(tc.result)
			}
		}
		s.calls = nil
	}
}

// rounds is "1 tool round" or "n tool rounds".
func rounds(n int) string {
	if n == 1 {
		return "1 tool round"
	}
	return fmt.Sprintf("%d tool rounds", n)
}
