package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
)

// events splits an SSE body into its data payloads.
func events(body string) []string {
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		if data, ok := strings.CutPrefix(ev, "data: "); ok {
			out = append(out, data)
		}
	}
	return out
}

// accumulate feeds an SSE body to an Accumulator as the adapter does.
func accumulate(t *testing.T, body string) (string, openai.Result, error) {
	t.Helper()
	var acc openai.Accumulator
	var text strings.Builder
	for _, data := range events(body) {
		if data == "[DONE]" {
			acc.Done()
			break
		}
		var c sdk.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("fixture chunk %s: %v", data, err)
		}
		delta, err := acc.Add(&c)
		text.WriteString(delta)
		if err != nil {
			return text.String(), openai.Result{}, err
		}
	}
	res, err := acc.Result()
	return text.String(), res, err
}

func checkCalls(t *testing.T, got []models.ToolCall, want []wantCall) {
	t.Helper()
	modeltest.CheckCalls(t, "call", got, want, 0)
}

func TestAccumulator_AwkwardCases(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			text, res, err := accumulate(t, fx.body)
			if text != fx.text {
				t.Errorf("text %q, want %q", text, fx.text)
			}
			if fx.err != nil {
				if !errors.Is(err, fx.err) || !strings.Contains(err.Error(), fx.errText) {
					t.Fatalf("err = %v, want %v saying %q", err, fx.err, fx.errText)
				}
				if len(res.ToolCalls) != 0 {
					t.Fatalf("a failed answer returned calls %+v", res.ToolCalls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkCalls(t, res.ToolCalls, fx.calls)
			if len(res.Truncated) != len(fx.truncated) {
				t.Fatalf("truncated %+v, want %+v", res.Truncated, fx.truncated)
			}
			for i, w := range fx.truncated {
				// The accumulator keeps the arguments received; the META
				// payload counts them.
				if g := res.Truncated[i]; g.ID != w.ID || g.Name != w.Name || !strings.Contains(w.Args, fmt.Sprintf(`"received":%d`, len(g.Arguments))) {
					t.Errorf("truncated %d = {%s %s %q}, want %+v", i, g.ID, g.Name, g.Arguments, w)
				}
			}
			if res.Finish != fx.finish || (res.Usage != nil) != fx.usage {
				t.Fatalf("finish %q usage %s, want %q usage %v", res.Finish, res.Usage, fx.finish, fx.usage)
			}
			if fx.usage && !strings.Contains(string(res.Usage), `"total_tokens":99`) {
				t.Fatalf("usage %s", res.Usage)
			}
		})
	}
}

func TestAccumulator_IDArrivingAfterTheFirstFragment(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_late","function":{"arguments":":1}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"name":"g","arguments":""}}]}`, ""),
		finish("tool_calls"), done)
	_, res, err := accumulate(t, body)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, res.ToolCalls, []wantCall{{"call_late", "f", `{"a":1}`}, {"call_chatcmpl-9x_1", "g", `{}`}})
}

func TestAccumulator_ServerErrorEvent(t *testing.T) {
	body := sse(content("Hi"), `data: {"error":{"message":"overloaded","type":"server_error"}}`+"\n\n")
	text, _, err := accumulate(t, body)
	var se *openai.ServerError
	if !errors.As(err, &se) || se.Message != "overloaded" || text != "Hi" {
		t.Fatalf("text %q err %v, want the server error", text, err)
	}
}

func TestAccumulator_CallWithoutName(t *testing.T) {
	body := sse(chunk(`{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]}`, ""), finish("tool_calls"), done)
	if _, _, err := accumulate(t, body); !errors.Is(err, openai.ErrInvalidToolCall) {
		t.Fatalf("err = %v, want ErrInvalidToolCall", err)
	}
}

// TestAccumulator_SplitAtEveryPosition: two parallel calls whose
// fragments interleave, the name of the first split at every position
// and the arguments of both split at every position (inside
// keys, escapes and multi-byte characters' escapes), read back whole.
func TestAccumulator_SplitAtEveryPosition(t *testing.T) {
	const name0, args0, args1 = "write_file", `{"path":"a\"b.txt","content":"caf\u00e9 <&>"}`, `{"command":"go test ./..."}`
	want := []wantCall{{"call_A", name0, args0}, {"call_B", "run_command", args1}}
	for k := 1; k < len(name0); k++ {
		body := sse(chunk(roleChunk, ""),
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"id":"call_A","type":"function","function":{"name":%q,"arguments":""}}]}`, name0[:k]), ""),
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"name":%q,"arguments":%q}}]}`, name0[k:], args0), ""),
			first(1, "call_B", "run_command", args1), finish("tool_calls"), done)
		_, res, err := accumulate(t, body)
		if err != nil {
			t.Fatalf("name split at %d: %v", k, err)
		}
		checkCalls(t, res.ToolCalls, want)
	}
	split := func(i, j int) {
		t.Helper()
		body := sse(chunk(roleChunk, ""),
			first(0, "call_A", name0, args0[:i]), first(1, "call_B", "run_command", ""),
			args(1, args1[:j]), args(0, args0[i:]), args(1, args1[j:]),
			finish("tool_calls"), usage, done)
		_, res, err := accumulate(t, body)
		if err != nil {
			t.Fatalf("split at %d and %d: %v", i, j, err)
		}
		checkCalls(t, res.ToolCalls, want)
	}
	for i := 0; i <= len(args0); i++ {
		split(i, i%(len(args1)+1))
	}
	for j := 0; j <= len(args1); j++ {
		split(len(args0)-j, j)
	}
}

// Some servers send the error of a stream as a plain string: it is the
// message.
func TestAccumulator_ServerErrorAsAString(t *testing.T) {
	body := sse(content("Hi"), `data: {"error":"Model has crashed, reload it"}`+"\n\n")
	_, _, err := accumulate(t, body)
	var se *openai.ServerError
	if !errors.As(err, &se) || se.Message != "Model has crashed, reload it" || err.Error() != "server error in stream: Model has crashed, reload it" {
		t.Fatalf("err %v, want the server's message", err)
	}
}
