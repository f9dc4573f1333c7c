package mcp

import (
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/tools"
)

// An imported tool's results and errors reach the model with "<", ">" and
// "&" as the server wrote them, as the tools package's own results do.
func TestValueOf_NotHTMLEscaped(t *testing.T) {
	const text = "a < b && c > d"
	v, err := valueOf(&sdk.CallToolResult{StructuredContent: map[string]any{"out": text}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(v.(json.RawMessage)), `{"out":"a < b && c > d"}`; got != want {
		t.Errorf("structured result = %s, want %s", got, want)
	}
	for name, res := range map[string]*sdk.CallToolResult{
		"text":       {IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}},
		"structured": {IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "x"}}, StructuredContent: map[string]any{"error": text}},
	} {
		_, err := valueOf(res)
		var re *tools.ResultError
		if !errors.As(err, &re) {
			t.Fatalf("%s: error %v is no *tools.ResultError", name, err)
		}
		want := map[string]string{"text": `{"success":false,"error":"a < b && c > d"}`, "structured": `{"error":"a < b && c > d"}`}[name]
		if got := string(re.Payload); got != want {
			t.Errorf("%s: error payload = %s, want %s", name, got, want)
		}
	}
}
