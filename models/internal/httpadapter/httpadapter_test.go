package httpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/models"
)

// TestConfig_ValidAndRetries: no negative bound or count is valid;
// NoRetries sets 0 retries, a positive count itself, 0 the SDK's default.
func TestConfig_ValidAndRetries(t *testing.T) {
	invalid := []Config{{MaxRetries: -2}, {Timeout: -1}, {IdleTimeout: -1}}
	for _, c := range invalid {
		if c.Valid() {
			t.Errorf("%+v is valid", c)
		}
	}
	want := map[int]string{0: "0 false", NoRetries: "0 true", 3: "3 true"}
	for max, w := range want {
		c := Config{MaxRetries: max}
		n, set := c.Retries()
		if got := fmt.Sprint(n, " ", set); !c.Valid() || got != w {
			t.Errorf("MaxRetries %d: valid %v, retries %s, want %s", max, c.Valid(), got, w)
		}
	}
}

func TestKeyFromEnv(t *testing.T) {
	errNoKey := errors.New("no key")
	t.Setenv("POLYWEAVE_TEST_DEFAULT_KEY", "k")
	if v, err := KeyFromEnv("", "POLYWEAVE_TEST_DEFAULT_KEY", errNoKey); err != nil || v != "k" {
		t.Fatalf("default variable: %q, %v", v, err)
	}
	if _, err := KeyFromEnv("POLYWEAVE_TEST_UNSET_KEY", "POLYWEAVE_TEST_DEFAULT_KEY", errNoKey); !errors.Is(err, errNoKey) {
		t.Fatalf("unset variable: %v, want it to wrap the caller's error", err)
	}
}

// TestEnding_Frames: calls with their index, truncated calls, thinking
// blocks, usage and the finish reason, in that order; no META frame for
// what is nil.
func TestEnding_Frames(t *testing.T) {
	e := Ending{
		ToolCalls: []models.ToolCall{{Index: 0, ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)}},
		Truncated: []models.ToolCall{{Index: 1, ID: "b", Name: "g", Arguments: json.RawMessage(`{"x":`)}},
		Thinking:  json.RawMessage(`[]`),
		Usage:     json.RawMessage(`{"total_tokens":3}`),
		Finish:    "length",
	}
	var got []string
	for _, f := range e.Frames("s") {
		got = append(got, fmt.Sprintf("%s %s %s %d", f.GetType(), f.GetName(), f.GetToolCallId(), f.GetMeta().GetIndex()))
	}
	want := []string{"TOOL_CALL f a 0", "META " + models.MetaTruncatedCall + " b 1", "META " + models.MetaThinkingBlocks + "  0", "META usage  0", "META finish  0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frames\n got  %q\n want %q", got, want)
	}
	bare := Ending{Finish: "stop"}
	if fs := bare.Frames("s"); len(fs) != 1 {
		t.Fatalf("an ending with only a finish reason: %d frames", len(fs))
	}
}

// TestQuote_ClipKeepsRunesWhole: a body clipped in the middle of a
// character is quoted up to the character, not with a replacement
// character where the body had none.
func TestQuote_ClipKeepsRunesWhole(t *testing.T) {
	body := "a" + strings.Repeat("é", bodyQuote) // the clip falls inside an é
	q := Quote([]byte(body))
	if strings.Contains(q, "\uFFFD") || !strings.HasSuffix(q, `é"…`) || len(q) > bodyQuote+len(`""…`) {
		t.Fatalf("Quote = %s, want the é before the clip whole, no replacement character", q)
	}
	if q := Quote([]byte("caf\xe9 " + strings.Repeat("x", bodyQuote))); !strings.HasPrefix(q, "\"caf\uFFFD x") {
		t.Fatalf("Quote = %s, want the byte that is not UTF-8 replaced", q)
	}
}

// A key shorter than 8 bytes is cut out where it stands as a word, and
// left where it is a part of one: a local server's key "test" leaves
// "latest" and "test-model" whole.
func TestRedactWord(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`key test refused`, `key [redacted] refused`},
		{`"Bearer test" (test).`, `"Bearer [redacted]" ([redacted]).`},
		{`test`, `[redacted]`},
		{`latest test-model testing tést test_1 tests`, `latest test-model testing tést test_1 tests`},
		{`ütest test✓ testtest test`, `ütest [redacted]✓ testtest [redacted]`},
	} {
		if got := redactWord(c.text, "test"); got != c.want {
			t.Errorf("redactWord(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// A key shorter than 4 bytes would cut ordinary words wherever they
// stand ("a", "to", "key"): it is cut out only where a server quotes a
// credential, whole between quotes or past an auth scheme.
func TestRedacted_TinyKeyOnlyWhereQuoted(t *testing.T) {
	for key, cases := range map[string][]struct{ text, want string }{
		"a": {
			{`HTTP 401: a key is required, see a guide`, `HTTP 401: a key is required, see a guide`},
			{`Incorrect API key provided: "a" (see your account)`, `Incorrect API key provided: "[redacted]" (see your account)`},
			{`Incorrect API key provided: "Bearer a" "" ""`, `Incorrect API key provided: "Bearer [redacted]" "" ""`},
			{`key 'a' refused; bearer a refused`, `key '[redacted]' refused; bearer [redacted] refused`},
			{`"ab" "a-b" Bearer ab`, `"ab" "a-b" Bearer ab`},
		},
		"key": {
			{`Incorrect API key provided: "key"`, `Incorrect API key provided: "[redacted]"`},
		},
	} {
		e := Open(Config{APIKey: key})
		for _, c := range cases {
			if got := e.redact(c.text, &credentials{}); got != c.want {
				t.Errorf("key %q: %q redacted to %q, want %q", key, c.text, got, c.want)
			}
		}
	}
}

// TestCredentials_HeaderValues: what a request's credential headers put
// among the secrets of its errors. Only the Authorization headers have a
// scheme before their credential, which stays readable; another header
// (X-Api-Key, Anthropic's; Api-Key, Azure's) is a credential whole, a
// Cookie header each cookie's value (and pair, for a value too short to
// be cut out wherever it stands); the parameters of a scheme such as
// AWS's or Digest carry credentials of their own, which a server may
// quote alone; a scheme with no credential, or a tiny one, leaves
// ordinary words whole.
func TestCredentials_HeaderValues(t *testing.T) {
	for _, c := range []struct {
		name, value, text, want string
	}{
		{"Cookie", "a=1234567890; b=abcdefghij", `cookie a=1234567890; b=abcdefghij`, `cookie a=[redacted]; b=[redacted]`},
		{"Cookie", `sid="quoted-value-123"`, `sid quoted-value-123`, `sid [redacted]`},
		{"Cookie", "theme=x", `cookie theme=x, x of y`, `cookie [redacted], x of y`},
		{"cookie", "session=0123456789", `got session=0123456789`, `got session=[redacted]`},
		{"X-Api-Key", "part one-0123456789", `key "part one-0123456789" refused`, `key "[redacted]" refused`},
		{"Api-Key", "azure key 01234567", `api-key azure key 01234567 refused`, `api-key [redacted] refused`},
		{"Proxy-Authorization", "Basic dXNlcjpwcm94eS1wYXNzd29yZA==", `proxy-password refused`, `[redacted] refused`},
		{"Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
			`<SignatureProvided>5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7</SignatureProvided> for host;x-amz-date`,
			`<SignatureProvided>[redacted]</SignatureProvided> for host;x-amz-date`},
		{"Authorization", `Digest username="ann", realm="api@example.com", uri="/v1/chat/completions", response="6629fae49393a05397450978507c4ef1"`,
			`digest 6629fae49393a05397450978507c4ef1 refused at api@example.com /v1/chat/completions`,
			`digest [redacted] refused at api@example.com /v1/chat/completions`},
		{"Authorization", "Bearer x", `x-request-id: x1, Bearer x refused, max "x"`, `x-request-id: x1, Bearer [redacted] refused, max "[redacted]"`},
		{"Authorization", "Bearer", `Bearer refused: no token`, `Bearer refused: no token`},
	} {
		sent := &credentials{}
		sent.header(c.name, []string{c.value})
		if got := Open(Config{}).redact(c.text, sent); got != c.want {
			t.Errorf("%s: %s: %q redacted to %q, want %q", c.name, c.value, c.text, got, c.want)
		}
	}
}

// TestRedactJSON: a JSON value has its strings (keys and values, as they
// read decoded) and numbers cut, its structure and order kept, compact;
// a number that held a credential becomes a string. What is not one
// JSON value, and a value whose credential stands across its strings,
// becomes the JSON string of its text, cut.
func TestRedactJSON(t *testing.T) {
	const key = "sk-secret-0123456789"
	cut := func(s string) string {
		s = strings.ReplaceAll(s, key, redacted)
		return redactWord(s, "4711")
	}
	ctx := context.WithValue(context.Background(), redactKey{}, cut)
	for _, c := range []struct{ raw, want string }{
		{`{"message":"bad key sk-secret-0123456789","code":4711}`, `{"message":"bad key [redacted]","code":"[redacted]"}`},
		{`{"message":"bad key sk-secret\/0123456789"}`, `{"message":"bad key sk-secret/0123456789"}`},
		{`{"message":"bad key sk-secret\u002d0123456789"}`, `{"message":"bad key [redacted]"}`},
		{"{ \"b\": [1, 2.5e3, true, false, null, {}, []],\n \"a\": {\"sk-secret-0123456789\": \"<x> & y\"} }",
			`{"b":[1,2.5e3,true,false,null,{},[]],"a":{"[redacted]":"<x> & y"}}`},
		{`"bad key sk-secret-0123456789"`, `"bad key [redacted]"`},
		{`47110`, `47110`},
		{`4711`, `"[redacted]"`},
		{`{"a":"sk-secret-","b":"0123456789"}`, `{"a":"sk-secret-","b":"0123456789"}`},
		{`{"a":"sk-secret-01234","b":"sk-secret-0123456789"}`, `{"a":"sk-secret-01234","b":"[redacted]"}`},
		{`["sk-secret-012345`, `"[\"sk-secret-012345"`},
		{`{"a":1} {"b":"sk-secret-0123456789"}`, `"{\"a\":1} {\"b\":\"[redacted]\"}"`},
		{`{"a":"sk-secret-0123456789`, `"{\"a\":\"[redacted]"`},
		{`{"k":"sk-secret-0123","x":"456789"}`, `{"k":"sk-secret-0123","x":"456789"}`},
	} {
		got := RedactJSON(ctx, []byte(c.raw))
		if string(got) != c.want {
			t.Errorf("RedactJSON(%s) = %s; want %s", c.raw, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("RedactJSON(%s) = %s, not valid JSON", c.raw, got)
		}
	}
	// A key across two strings, which the text shows whole: the text, cut.
	across := `["sk-secret-","0123456789"]`
	ctx = context.WithValue(context.Background(), redactKey{}, func(s string) string { return strings.ReplaceAll(s, `sk-secret-","0123456789`, redacted) })
	if got, want := string(RedactJSON(ctx, []byte(across))), `"[\"[redacted]\"]"`; got != want {
		t.Errorf("RedactJSON(%s) = %s; want %s", across, got, want)
	}
}
