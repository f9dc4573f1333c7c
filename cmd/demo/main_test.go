package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestRun_PrintsTheConversation(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{"TOOL_CALL", "TOOL_RESULT", "TEXT", "END"}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w+" ") {
			t.Errorf("line %d = %q, want a %s frame", i, lines[i], w)
		}
	}
	if !strings.Contains(out.String(), "Hello, Ada") {
		t.Errorf("the tool result did not reach the model's answer:\n%s", out.String())
	}
}
