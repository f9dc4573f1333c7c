package messages

import (
	"strconv"
	"strings"
)

// Format renders f on one line for transcripts and logs, in a stable
// order that golden files can rely on:
//
//	TOOL_CALL stream=s1 id=call_1 name=greet streaming payload={"name":"Ada"}
//
// Empty fields are left out; text is quoted.
func Format(f *Frame) string {
	var b strings.Builder
	b.WriteString(f.GetType().String())
	field := func(k, v string) {
		if v != "" {
			b.WriteString(" " + k + "=" + v)
		}
	}
	field("stream", f.GetStreamId())
	field("id", f.GetToolCallId())
	field("name", f.GetName())
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
	field("failure_kind", m.GetFailureKind())
	if d := m.GetDurability(); d != nil {
		field("wrapper_id", d.GetWrapperId())
		field("wrapper_type", d.GetWrapperType())
		if d.RestoreState != nil { // an empty state is a restore too
			field("restore_state", strconv.Itoa(len(d.GetRestoreState()))+"B")
		}
	}
	if f.GetText() != "" {
		field("text", strconv.Quote(f.GetText()))
	}
	if len(f.GetPayload()) > 0 {
		field("payload", string(f.GetPayload()))
	}
	return b.String()
}
