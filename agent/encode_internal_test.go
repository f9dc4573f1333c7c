package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/models"
)

// encodes checks that c encodes msgs as models.EncodeMessages does.
func encodes(t *testing.T, c *encodeCache, msgs []models.Message) json.RawMessage {
	t.Helper()
	got, want := c.encode(msgs), models.EncodeMessages(msgs)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded %s, want %s", got, want)
	}
	return got
}

// A list sent again is not encoded again: the Run sends the payload kept,
// allocating nothing for it.
func TestEncodeCache_SameListNotEncodedAgain(t *testing.T) {
	var c encodeCache
	msgs := []models.Message{models.SystemMessage("Be brief."), models.UserMessage("run the <three> tools")}
	first := encodes(t, &c, msgs)
	again := encodes(t, &c, []models.Message{models.SystemMessage("Be brief."), models.UserMessage("run the <three> tools")})
	if &first[0] != &again[0] {
		t.Error("the same list was encoded again")
	}
	if n := testing.AllocsPerRun(100, func() { c.encode(msgs) }); n != 0 {
		t.Errorf("a list kept allocates %v times, want 0", n)
	}
}

// What the caller changes in its list after a Run is what the next Run
// sends: the agent keeps a copy.
func TestEncodeCache_CallerChangesItsList(t *testing.T) {
	var c encodeCache
	msgs := []models.Message{models.UserMessage("one")}
	encodes(t, &c, msgs)
	msgs[0].Content = "two"
	encodes(t, &c, msgs)
	msgs[0].Role = models.RoleSystem
	encodes(t, &c, msgs)
	msgs[0].ToolCallID = "call_1"
	encodes(t, &c, msgs)
	encodes(t, &c, append(msgs, models.UserMessage("more")))
	encodes(t, &c, msgs[:0])
}

// Lists with tool calls or thinking blocks (bytes the caller may change),
// long lists and large ones are not kept; neither matches a kept list of the same
// text.
func TestEncodeCache_OnlyShortTextListsKept(t *testing.T) {
	text := []models.Message{models.AssistantMessage("")}
	calls := []models.Message{models.AssistantMessage("", models.ToolCall{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{}`)})}
	thinking := []models.Message{{Role: models.RoleAssistant, ThinkingBlocks: json.RawMessage(`[{"type":"thinking"}]`)}}
	long := make([]models.Message, maxKeptMessages+1)
	for i := range long {
		long[i] = models.UserMessage(strconv.Itoa(i))
	}
	big := []models.Message{models.UserMessage(string(make([]byte, maxKeptBytes)))}
	for _, msgs := range [][]models.Message{calls, thinking, long, big} {
		var c encodeCache
		encodes(t, &c, msgs)
		if c.last.Load() != nil {
			t.Errorf("%d messages kept, with %d calls and %d bytes of thinking", len(msgs), len(msgs[0].ToolCalls), len(msgs[0].ThinkingBlocks))
		}
		encodes(t, &c, text)
		encodes(t, &c, msgs)
	}
}

// A host that never sends a list twice gets no copy per Run; one that
// moves on to another list sent again gets it kept after keptMisses Runs.
func TestEncodeCache_KeptListReplacedAfterMisses(t *testing.T) {
	var c encodeCache
	old := []models.Message{models.UserMessage("old")}
	encodes(t, &c, old)
	kept := c.last.Load()
	for i := range keptMisses - 1 {
		encodes(t, &c, []models.Message{models.UserMessage("new " + strconv.Itoa(i))})
	}
	if c.last.Load() != kept {
		t.Fatalf("the list kept was replaced after %d other lists", keptMisses-1)
	}
	encodes(t, &c, old) // a match starts the count again
	next := []models.Message{models.UserMessage("next")}
	for range keptMisses - 1 {
		encodes(t, &c, next)
	}
	if c.last.Load() != kept {
		t.Fatal("a match did not start the count of misses again")
	}
	encodes(t, &c, next)
	if c.last.Load() == kept {
		t.Fatalf("the list kept was not replaced after %d other lists", keptMisses)
	}
	again := encodes(t, &c, next)
	if &again[0] != &c.last.Load().payload[0] {
		t.Error("the list kept last is encoded again")
	}
}

// Runs of several sessions at once, each with its list, each send theirs.
func TestEncodeCache_Concurrent(t *testing.T) {
	var c encodeCache
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				msgs := []models.Message{models.UserMessage(strconv.Itoa(g + i%2))}
				if got, want := c.encode(msgs), models.EncodeMessages(msgs); !bytes.Equal(got, want) {
					t.Errorf("encoded %s, want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// sameText compares every field of a message the encoding reads: a field
// added to models.Message must be added to it (and to keepable).
func TestSameText_KnowsEveryField(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[models.Message]().Fields() {
		fields = append(fields, f.Name)
	}
	want := []string{"Role", "Content", "ToolCalls", "ToolCallID", "ThinkingBlocks"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("models.Message has fields %v; sameText and keepable know %v", fields, want)
	}
}
