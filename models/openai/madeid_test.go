package openai_test

import (
	"testing"
)

// TestAccumulator_MadeUpIDNeverRepeatsARealOne: a call the server sent
// without an id gets "call_<completion id>_<n>"; when another call of the
// same answer carries exactly that id, the two would share it and one of
// them could never be answered. Ids must stay unique in an answer: the
// made-up one must differ, or the answer must fail with
// ErrInvalidToolCall as for any two calls sharing an id.
func TestAccumulator_MadeUpIDNeverRepeatsARealOne(t *testing.T) {
	body := `data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}

data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_x_0","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}

data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	_, res, err := accumulate(t, body)
	if err != nil {
		return // refused: fine
	}
	seen := map[string]int{}
	for i, c := range res.ToolCalls {
		if j, dup := seen[c.ID]; dup {
			t.Fatalf("calls %d (%s) and %d (%s) share the id %q", j, res.ToolCalls[j].Name, i, c.Name, c.ID)
		}
		seen[c.ID] = i
	}
}
