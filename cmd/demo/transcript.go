package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// maxShown is how much of a tool call's arguments or result a transcript
// line shows.
const maxShown = 160

// transcript prints the run as it happens. Human lines go to out; with
// -json the frames go to frames as JSON lines and everything else to out.
// Its methods are safe for concurrent use: supervision events and injected
// faults are reported from actor goroutines while the frames are printed
// from the main one.
type transcript struct {
	mu     sync.Mutex
	out    io.Writer
	frames io.Writer // nil: frames are printed as human lines on out
	start  time.Time
	inText bool                 // a model text line is open (deltas go on it)
	textOf view                 // whose text line it is
	held   [][2]string          // side notes (label, text) waiting for their place
	calls  map[string]shownCall // the calls shown and not yet answered, by id
	// answered are the held calls answered at the terminal (-approve
	// ask) whose resume has not yet said so.
	answered map[string]bool
	named    map[string]int // how many calls of each tool were shown
	shown    chan struct{}  // closed and replaced when a call is shown
	err      error          // the first write error
}

// view is how one agent's lines look: the sub-agents of a team are
// indented under the call that delegated to them, and the model's text is
// labelled with the agent's name (the zero view: no indent, "model").
type view struct {
	indent string
	name   string
}

func (v view) label() string {
	if v.name == "" {
		return "model"
	}
	return v.name
}

// shownCall is a call the transcript has shown: when, its tool and the
// view it was shown in.
type shownCall struct {
	at   time.Time
	name string
	v    view
}

func newTranscript(out, frames io.Writer, start time.Time) *transcript {
	return &transcript{out: out, frames: frames, start: start, calls: map[string]shownCall{},
		named: map[string]int{}, answered: map[string]bool{}, shown: make(chan struct{})}
}

// lineIn prints one labelled line in v, closing an open text line first.
// The caller holds t.mu.
func (t *transcript) lineIn(v view, label, format string, a ...any) {
	t.endText()
	t.printf("%s %s%-10s %s\n", t.stamp(), v.indent, label, fmt.Sprintf(format, a...))
}

func (t *transcript) printf(format string, a ...any) {
	if _, err := fmt.Fprintf(t.out, format, a...); err != nil && t.err == nil {
		t.err = err
	}
}

func (t *transcript) endText() {
	if t.inText {
		t.inText = false
		t.printf("\n")
	}
}

// stamp is the time since the start, right-aligned.
func (t *transcript) stamp() string {
	return fmt.Sprintf("%9s", shortDuration(time.Since(t.start)))
}

// shortDuration renders d with a precision that suits its size.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// Note prints a line about the run itself, after any held side notes.
func (t *transcript) Note(label, format string, a ...any) {
	t.NoteIn(view{}, label, format, a...)
}

// NoteIn is Note in an agent's view.
func (t *transcript) NoteIn(v view, label, format string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushIn(v)
	t.lineIn(v, label, format, a...)
}

// EndText closes the open text line.
func (t *transcript) EndText() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endText()
}

// WaitCall waits until the nth call of the tool name has been shown, or a
// while has passed: a sub-agent's lines come after the lead's call that
// started it, though they are printed from another goroutine.
func (t *transcript) WaitCall(name string, n int) {
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		done, shown := t.named[name] >= n, t.shown
		t.mu.Unlock()
		if done {
			return
		}
		select {
		case <-shown:
		case <-deadline.C:
			return
		}
	}
}

// callShown counts a call of the top agent as shown. The caller holds
// t.mu.
func (t *transcript) callShown(name string) {
	t.named[name]++
	close(t.shown)
	t.shown = make(chan struct{})
}

// Event prints one event of an agent's conversation.
func (t *transcript) Event(v view, ev agent.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Frame != nil {
		t.frame(v, ev.Frame)
		return
	}
	if ev.Kind == agent.EventError {
		t.flushIn(v)
		t.lineIn(v, "error", "%s", ev.Text)
	}
}

// hold keeps a side note (an injected fault, a supervision decision) until
// the frame that shows its consequence: the main goroutine prints frames
// some time after the actors emitted them, so a note printed at once
// would come before frames that happened before it. The note is printed
// in that frame's view: a sub-agent's fault is indented with its lines.
func (t *transcript) hold(label, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = append(t.held, [2]string{label, text})
}

// Flush prints the held side notes now.
func (t *transcript) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flush()
}

// flush prints the held side notes unindented. The caller holds t.mu.
func (t *transcript) flush() { t.flushIn(view{}) }

// flushIn prints the held side notes in v, the view of the line that
// shows their consequence. The caller holds t.mu.
func (t *transcript) flushIn(v view) {
	for _, n := range t.held {
		t.lineIn(v, n[0], "%s", n[1])
	}
	t.held = t.held[:0]
}

// Fault reports an injected panic.
func (t *transcript) Fault(msg string) { t.hold("fault", msg) }

// Supervision reports a supervisor's decision.
func (t *transcript) Supervision(ev supervisor.Event) {
	what := map[supervisor.Directive]string{supervisor.Restart: "restarted", supervisor.Stop: "stopped",
		supervisor.Resume: "resumed", supervisor.Escalate: "escalated"}[ev.Directive]
	if what == "" {
		what = ev.Directive.String()
	}
	what += " " + ev.Child
	switch {
	case ev.IntensityExceeded:
		what += " (too many restarts)"
	case ev.Failures > 0:
		what += fmt.Sprintf(" (failure %d)", ev.Failures)
	}
	t.hold("supervisor", fmt.Sprintf("%s: %v", what, ev.Reason))
}

// Frame prints one frame the agent emitted.
func (t *transcript) Frame(f *messages.Frame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.frame(view{}, f)
}

// frame prints f in v. The caller holds t.mu.
func (t *transcript) frame(v view, f *messages.Frame) {
	if f.GetType() == messages.FrameType_TOOL_CALL && v.indent == "" {
		defer t.callShown(f.GetName())
	}
	switch f.GetType() {
	case messages.FrameType_ERROR, messages.FrameType_END:
		t.flushIn(v)
	case messages.FrameType_TOOL_RESULT:
		if f.IsErrorResult() {
			t.flushIn(v)
		}
	}
	if t.frames != nil {
		b, err := protojson.Marshal(f)
		if err == nil {
			_, err = fmt.Fprintf(t.frames, "%s\n", b)
		}
		if err != nil && t.err == nil {
			t.err = err
		}
		return
	}
	switch f.GetType() {
	case messages.FrameType_TEXT:
		if f.IsToolArgChunk() {
			return
		}
		if t.inText && t.textOf != v {
			t.endText()
		}
		if !t.inText {
			t.printf("%s %s%-10s ", t.stamp(), v.indent, v.label())
			t.inText, t.textOf = true, v
		}
		t.printf("%s", strings.ReplaceAll(f.GetText(), "\n", "\n"+strings.Repeat(" ", 21+len(v.indent))))
	case messages.FrameType_TOOL_CALL:
		_, again := t.calls[f.GetToolCallId()]
		t.calls[f.GetToolCallId()] = shownCall{at: time.Now(), name: f.GetName(), v: v}
		if again {
			// A resumed session hands out its round's calls again: this
			// one is shown already and waits for its result (it was held
			// for approval, or running when the loop crashed).
			return
		}
		t.lineIn(v, "call", "%s %s %s", f.GetName(), f.GetToolCallId(), shown(f.GetPayload()))
	case messages.FrameType_TOOL_RESULT:
		status := "ok"
		if f.IsErrorResult() {
			status = "FAILED (" + string(tools.KindOf(f)) + ")"
		}
		took := ""
		if c, ok := t.calls[f.GetToolCallId()]; ok {
			took = " in " + shortDuration(time.Since(c.at))
			delete(t.calls, f.GetToolCallId())
		}
		t.lineIn(v, "result", "%s %s %s%s: %s", f.GetName(), f.GetToolCallId(), status, took, shown(f.GetPayload()))
	case messages.FrameType_META:
		switch f.GetName() {
		case models.MetaUsage:
			t.lineIn(v, "usage", "%s", usageLine(f.GetPayload()))
		case tools.MetaSession:
			t.lineIn(v, "session", "%s", sessionLine(f.GetPayload(), t.answered))
			clear(t.answered)
		}
	case messages.FrameType_ERROR:
		t.lineIn(v, "error", "%s", f.GetText())
	case messages.FrameType_END:
		t.endText()
	default:
		t.lineIn(v, strings.ToLower(f.GetType().String()), "%s", clip(messages.Format(f)))
	}
}

// Answered notes that the held call id was answered at the terminal: the
// resume that follows applies the answer instead of waiting again.
func (t *transcript) Answered(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answered[id] = true
}

// CutCalls prints a result line for each call shown but not answered
// when the run was cut (by -timeout or an interrupt): such a call was
// cancelled, and that is the result a durable session keeps for it.
func (t *transcript) CutCalls(why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.frames != nil {
		return
	}
	t.flush()
	ids := make([]string, 0, len(t.calls))
	for id := range t.calls {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return t.calls[a].at.Compare(t.calls[b].at) })
	for _, id := range ids {
		c := t.calls[id]
		t.lineIn(c.v, "result", "%s %s FAILED (cancelled) after %s: %s", c.name, id, shortDuration(time.Since(c.at)), why)
		delete(t.calls, id)
	}
}

// Err is the first error writing the transcript met.
func (t *transcript) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// shown is JSON made compact and readable, cut to maxShown runes.
func shown(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		raw = b.Bytes()
	}
	return clip(string(raw))
}

// clip shortens s to maxShown runes.
func clip(s string) string {
	r := []rune(s)
	if len(r) <= maxShown {
		return s
	}
	return string(r[:maxShown]) + fmt.Sprintf("… (%d more characters)", len(r)-maxShown)
}

func usageLine(payload []byte) string {
	var u struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
	if json.Unmarshal(payload, &u) != nil {
		return string(payload)
	}
	return fmt.Sprintf("%d prompt + %d completion = %d tokens", u.Prompt, u.Completion, u.Total)
}
