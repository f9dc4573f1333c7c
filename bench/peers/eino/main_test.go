package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cloudwego/eino/schema"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMainCodePrintsOneResultLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := mainCode([]string{"--runs", "3", "--warmup", "1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr: %s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Fatalf("stdout has %d lines, want 1: %q", n, stdout.String())
	}
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("decode result: %v", err)
	}
	if res.Peer != "eino" || res.Runs != 3 {
		t.Errorf("peer %q runs %d, want eino 3", res.Peer, res.Runs)
	}
	if res.Seconds <= 0 || res.RunsPerSec <= 0 || res.NsPerRun <= 0 {
		t.Errorf("non-positive timings: %+v", res)
	}
}

func TestMainCodeRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{{"--runs", "0"}, {"--warmup", "-1"}, {"extra"}, {"--bogus"}} {
		var stdout, stderr bytes.Buffer
		if code := mainCode(args, &stdout, &stderr); code != 2 {
			t.Errorf("args %q: exit code %d, want 2", args, code)
		}
		if stdout.Len() != 0 {
			t.Errorf("args %q: stdout %q, want empty", args, stdout.String())
		}
	}
}

func TestRunFollowsScriptRepeatedly(t *testing.T) {
	ctx := context.Background()
	for _, streamed := range []bool{false, true} {
		c, err := newConversation(ctx, streamed)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := c.run(ctx); err != nil {
				t.Fatalf("streamed %v, run %d: %v", streamed, i, err)
			}
		}
	}
}

// TestStreamCutsArgumentsAndText: in the streaming conversation the
// model's stream carries each call's arguments in 8-byte chunks (id and
// name on the first) and the answer in 1-byte deltas, and the tools get
// the note whole.
func TestStreamCutsArgumentsAndText(t *testing.T) {
	ctx := context.Background()
	m := &scriptedModel{streamed: true}
	sr, err := m.Stream(ctx, []*schema.Message{schema.UserMessage(userPrompt)})
	if err != nil {
		t.Fatal(err)
	}
	var args string
	chunks := 0
	for {
		part, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tc := part.ToolCalls[0]
		if (chunks == 0) != (tc.ID != "") || len(tc.Function.Arguments) > streamArgChunk {
			t.Fatalf("chunk %d: %+v", chunks, tc)
		}
		args += tc.Function.Arguments
		chunks++
	}
	if args != streamedArguments(1) || chunks != (len(args)+streamArgChunk-1)/streamArgChunk || chunks < 4 {
		t.Fatalf("arguments %q in %d chunks", args, chunks)
	}
	final := []*schema.Message{schema.UserMessage(userPrompt), schema.ToolMessage("{}", "a"), schema.ToolMessage("{}", "b"), schema.ToolMessage("{}", "c")}
	if sr, err = m.Stream(ctx, final); err != nil {
		t.Fatal(err)
	}
	parts, err := sr.Recv()
	for n := 1; err == nil; n++ {
		if len(parts.Content) != streamTextDelta {
			t.Fatalf("delta %d: %q", n, parts.Content)
		}
		parts, err = sr.Recv()
	}
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
}

func TestRunDetectsOffScriptArguments(t *testing.T) {
	ctx := context.Background()
	c, err := newConversation(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	// The tools keep the argument they were built with; the model now sends
	// another one for noop_b.
	saved := script[1]
	t.Cleanup(func() { script[1] = saved })
	script[1].n = 99

	err = c.run(ctx)
	if !errors.Is(err, errOffScript) {
		t.Fatalf("run error %v, want errOffScript", err)
	}
	if !strings.Contains(err.Error(), "noop_b got n=99") {
		t.Errorf("error %q does not name the bad argument", err)
	}
}
