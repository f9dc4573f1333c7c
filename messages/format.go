package messages

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format renders f on one line for transcripts and logs, in a stable
// order that golden files can rely on:
//
//	TOOL_CALL stream=s1 id=call_1 name=greet streaming payload={"name":"Ada"}
//
// Empty fields are left out; text is quoted. So that a frame is one line
// whatever it holds, and no field passes for another (or for a frame of
// its own): an id or name with a space, a quote, a control or format
// character or invalid UTF-8 is quoted too; a payload stays as it is
// unless it holds control or format characters, line separators or
// invalid UTF-8, and is then compacted when it is JSON whose only such
// characters are whitespace between tokens (pretty-printed JSON), quoted
// otherwise.
func Format(f *Frame) string {
	var b strings.Builder
	b.WriteString(f.GetType().String())
	field := func(k, v string) {
		if v != "" {
			b.WriteString(" " + k + "=" + v)
		}
	}
	name := func(k, v string) { field(k, quoteName(v)) }
	name("stream", f.GetStreamId())
	name("id", f.GetToolCallId())
	name("name", f.GetName())
	m := f.GetMeta()
	for _, flag := range []struct {
		on   bool
		name string
	}{
		{m.GetStreaming(), "streaming"},
		{m.GetToolArgStream(), "tool_arg_stream"},
		{m.GetToolComplete(), "tool_complete"},
		{m.GetIsError(), "is_error"},
	} {
		if flag.on {
			b.WriteString(" " + flag.name)
		}
	}
	if m.GetIndex() != 0 {
		field("index", strconv.FormatUint(uint64(m.GetIndex()), 10))
	}
	name("failure_kind", m.GetFailureKind())
	if d := m.GetDurability(); d != nil {
		name("wrapper_id", d.GetWrapperId())
		name("wrapper_type", d.GetWrapperType())
		if d.RestoreState != nil { // an empty state is a restore too
			field("restore_state", strconv.Itoa(len(d.GetRestoreState()))+"B")
		}
	}
	if f.GetText() != "" {
		field("text", strconv.Quote(f.GetText()))
	}
	if p := f.GetPayload(); len(p) > 0 {
		field("payload", oneLinePayload(p))
	}
	return b.String()
}

// quoteName returns s as it is when it is one word of visible characters,
// and quoted otherwise.
func quoteName(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool {
		return r == '"' || unicode.IsSpace(r) || !unicode.IsGraphic(r)
	}) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// oneLinePayload returns p as it is when it is one line of printable
// text (spaces and all: the payload is the last field), compacted when it
// is JSON whose line breaks or tabs are whitespace between tokens, and
// quoted otherwise.
func oneLinePayload(p []byte) string {
	if printable(p) {
		return string(p)
	}
	var c bytes.Buffer
	if json.Compact(&c, p) == nil && printable(c.Bytes()) {
		return c.String()
	}
	return strconv.Quote(string(p))
}

// printable reports whether p is valid UTF-8 of visible characters and
// spaces only: no control or format characters (a bidirectional override
// among them), no line or paragraph separators. Such text stays on one
// line, and reads as it is written.
func printable(p []byte) bool {
	return utf8.Valid(p) && bytes.IndexFunc(p, func(r rune) bool { return !unicode.IsGraphic(r) }) < 0
}
