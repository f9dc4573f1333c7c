package tools_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// TestInstaller_EveryConversationGetsTools: three conversations through
// one installer (two on new streams, one a second request on a stream
// already used) each get tools, tool_choice and the system prompt, in
// front of their own messages; the frames after a request's first pass
// unchanged.
func TestInstaller_EveryConversationGetsTools(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	answer := []*messages.Frame{messages.Text("", "ok"), messages.End("")}
	spec, err := tools.NewInstaller(tooltest.ScriptedModel("model", [][]*messages.Frame{answer, answer}, model.observe),
		&tools.InstallerOptions{
			RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}},
			ToolChoice:    raw(`"auto"`),
			SystemPrompt:  "Be brief.",
		})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	toolsLine := `PARAM stream=%s name=tools payload=[{"type":"function","function":{"name":"weather","description":"Current weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}]`
	for i, stream := range []string{"a", "b", "a"} {
		ask := fmt.Sprintf(`[{"role":"user","content":"question %d"}]`, i)
		if err := conn.SendAll(messages.RawParam(stream, "messages", raw(ask)),
			messages.RawParam(stream, "temperature", raw(`0`)), messages.End(stream)); err != nil {
			t.Fatal(err)
		}
		got := lines(model.until(t, isEnd))
		want := []string{
			fmt.Sprintf(toolsLine, stream),
			fmt.Sprintf(`PARAM stream=%s name=tool_choice payload="auto"`, stream),
			fmt.Sprintf(`PARAM stream=%s name=messages payload=[{"role":"system","content":"Be brief."},{"role":"user","content":"question %d"}]`, stream, i),
			fmt.Sprintf(`PARAM stream=%s name=temperature payload=0`, stream),
			fmt.Sprintf(`END stream=%s`, stream),
		}
		if !slices.Equal(got, want) {
			t.Fatalf("conversation %d:\n%q\nwant\n%q", i, got, want)
		}
		frames, err := conn.RecvStream(testCtx(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		if l := lines(frames); !slices.Equal(l, []string{"TEXT stream=" + stream + ` text="ok"`, "END stream=" + stream}) {
			t.Fatalf("conversation %d answered %q", i, l)
		}
	}
}
