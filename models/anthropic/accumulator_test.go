package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// accumulate feeds the events of an SSE body to an Accumulator as the
// adapter does, and returns the text it streamed and its result.
func accumulate(t *testing.T, body string) (string, anthropic.Result, error) {
	t.Helper()
	var acc anthropic.Accumulator
	var text strings.Builder
	for _, ev := range strings.Split(body, "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok || strings.HasPrefix(ev, "event: ping") {
			continue
		}
		var e sdk.MessageStreamEventUnion
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("fixture event %s: %v", data, err)
		}
		delta, err := acc.Add(&e)
		text.WriteString(delta)
		if err != nil {
			return text.String(), anthropic.Result{}, err
		}
	}
	res, err := acc.Result()
	return text.String(), res, err
}

// TestAccumulator_InterleavedBlocksSplitEverywhere: a thinking block, a
// text block and two tool_use blocks whose deltas interleave, the input
// of the first tool split at every character, read back as the text, the
// calls in block order and the thinking block with its signature.
func TestAccumulator_InterleavedBlocksSplitEverywhere(t *testing.T) {
	const input = `{"path":"a\"b.txt","content":"caf\u00e9 <&> ✓"}`
	for i := 0; i <= len(input); i++ {
		if i < len(input) && !utf8.RuneStart(input[i]) {
			continue // a JSON string cannot carry half a character
		}
		body := sse(messageStart(10, 0, 0), thinkingStart(0), thinkingDelta(0, "Two files"), textStart(1),
			toolStart(2, "toolu_A", "write_file"), inputDelta(2, ""), textDelta(1, "Writing "), thinkingDelta(0, " to write."),
			inputDelta(2, input[:i]), ping, toolStart(3, "toolu_B", "list_files"), signatureDelta(0, "c2ln"), blockStop(0),
			textDelta(1, "both."), blockStop(3), inputDelta(2, input[i:]), blockStop(1), blockStop(2),
			messageDelta("tool_use", 40), messageStop)
		text, res, err := accumulate(t, body)
		if err != nil {
			t.Fatalf("input split at %d: %v", i, err)
		}
		if text != "Writing both." || res.Finish != "tool_calls" {
			t.Fatalf("split at %d: text %q finish %q", i, text, res.Finish)
		}
		modeltest.CheckCalls(t, "call", res.ToolCalls, []wantCall{{"toolu_A", "write_file", input}, {"toolu_B", "list_files", `{}`}}, 0)
		want := `[{"type":"thinking","thinking":"Two files to write.","signature":"c2ln"}]`
		if !modeltest.JSONEqual(res.Thinking, []byte(want)) {
			t.Fatalf("split at %d: thinking %s, want %s", i, res.Thinking, want)
		}
	}
}
