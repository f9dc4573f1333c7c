package messages

import (
	"bytes"
	"testing"
)

// The payloads messages builds reach the model as the tools wrote them:
// "<", ">" and "&" are not turned into \u003c, \u003e and \u0026.
func TestToolPayloads_NotHTMLEscaped(t *testing.T) {
	const text = `a < b && c > d`
	res, err := ToolResult("s", "c1", "t", map[string]string{"out": text})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"out":"a < b && c > d"}`; string(res.GetPayload()) != want {
		t.Errorf("ToolResult payload = %s, want %s", res.GetPayload(), want)
	}
	e := ToolError("s", "c1", "t", text)
	if want := `{"success":false,"error":"a < b && c > d"}`; string(e.GetPayload()) != want {
		t.Errorf("ToolError payload = %s, want %s", e.GetPayload(), want)
	}
	for _, p := range [][]byte{res.GetPayload(), e.GetPayload()} {
		if bytes.HasSuffix(p, []byte("\n")) {
			t.Errorf("payload %q ends in a newline", p)
		}
	}
	var back ErrorResult
	if err := e.Decode(&back); err != nil || back.Error != text {
		t.Errorf("ToolError decodes to %+v, %v; want its message back", back, err)
	}
}
