package anthropic_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// TestAdapter_TwoToolUseBlocksWithOneIDAreAnError: results are matched to
// calls by id, so two tool_use blocks sharing an id can never both be
// answered. The OpenAI accumulator refuses such a stream with
// ErrInvalidToolCall; the Anthropic one must too, instead of handing out
// frames that break the response contract (a duplicate TOOL_CALL id).
func TestAdapter_TwoToolUseBlocksWithOneIDAreAnError(t *testing.T) {
	body := sse(messageStart(10, 0, 0),
		toolStart(0, "toolu_01X", "read_file"), inputDelta(0, `{"path":"a.txt"}`), blockStop(0),
		toolStart(1, "toolu_01X", "read_file"), inputDelta(1, `{"path":"b.txt"}`), blockStop(1),
		messageDelta("tool_use", 20), messageStop)
	rg := newRig(t, anthropic.Options{}, modeltest.StreamBody(body))
	r := rg.Ask("s1", userAsk)
	modeltest.WantFailed(t, r, "toolu_01X", anthropic.ErrInvalidToolCall.Error())
}
