package models

import (
	"encoding/json"
	"testing"
	"testing/quick"
	"unsafe"
)

// TestEncodedLen: the size AppendJSON reserves is the size it writes, for
// any strings (escapes, control characters, invalid UTF-8) in any field.
func TestEncodedLen(t *testing.T) {
	check := func(role, content, id, name, args, callID string, thinking bool) bool {
		m := Message{Role: role, Content: content, ToolCallID: callID}
		if id != "" || name != "" {
			m.ToolCalls = []ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(args)}, {ID: name}}
		}
		if thinking {
			m.ThinkingBlocks = json.RawMessage(`[{"type":"thinking"}]`)
		}
		got := m.AppendJSON(nil)
		if len(got) != m.encodedLen() || !json.Valid(got) {
			t.Logf("%+v: encoded %d bytes (%s), reserved %d", m, len(got), got, m.encodedLen())
			return false
		}
		return true
	}
	if !check(RoleAssistant, "", "c\x00\"1", "f\\", "", "", true) || !check(RoleTool, "\xff\xfe é \u2028 <&>", "", "", "", "c\n1", false) {
		t.Fatal("fixed cases")
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 500}); err != nil {
		t.Fatal(err)
	}
}

// TestAnswerWithRoom_SizeClass: NewAnswer's one allocation, with the
// 8-byte header the runtime adds to objects of more than 512 bytes that
// hold pointers, fits the 1152-byte size class; a field more would make
// every Answer take 1280.
func TestAnswerWithRoom_SizeClass(t *testing.T) {
	if n := unsafe.Sizeof(answerWithRoom{}) + 8; n > 1152 {
		t.Errorf("NewAnswer allocates %d bytes, more than the 1152-byte size class", n)
	}
}

// TestStringLen_IsAppendStringsLength: the room AppendJSON makes for a
// string is what appendString writes, for every byte alone and for mixes
// of escapes, multi-byte runes and invalid UTF-8.
func TestStringLen_IsAppendStringsLength(t *testing.T) {
	strs := []string{"", "plain", "a\"b\\c\nd\re\tf", "\x00\x01\x1f", "é日本\U0001F600", "\xff\xfe", "a\xe2\x82", "\u2028<>&"}
	for c := range 256 {
		strs = append(strs, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"é")
	}
	for _, s := range strs {
		if got, want := stringLen(s), len(appendString(nil, s)); got != want {
			t.Errorf("stringLen(%q) = %d, appendString writes %d", s, got, want)
		}
	}
}
