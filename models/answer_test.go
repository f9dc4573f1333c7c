package models_test

import (
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// TestAnswer_FinishReason: the finish reason is read whether plain or
// with JSON escapes; a payload that is not a JSON string is ignored.
func TestAnswer_FinishReason(t *testing.T) {
	for payload, want := range map[string]string{
		`"stop"`:        "stop",
		`"tool_calls"`:  "tool_calls",
		`"a\"b\u00e9"`:  `a"bé`,
		`""`:            "",
		`42`:            "kept",
		`"unterminated`: "kept",
		`"bad\escape"`:  "kept",
	} {
		a := models.Answer{Finish: "kept"}
		a.Add(messages.Meta("s", models.MetaFinish, json.RawMessage(payload)))
		if a.Finish != want {
			t.Errorf("finish %s: %q, want %q", payload, a.Finish, want)
		}
	}
}
