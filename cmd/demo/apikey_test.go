package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// Anthropic's and OpenAI's own APIs answer every request without a key
// 401: -provider anthropic without -base-url, or -base-url at
// api.openai.com, without a key is a bad command line (exit 2), not three
// failed requests. A -base-url of your own may take no key.
func TestParseFlags_OwnAPIsNeedAKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("DEMO_TEST_ANTHROPIC_KEY", "sk-ant-test")
	t.Setenv("OPENAI_API_KEY", "")
	for _, tc := range []struct {
		args []string
		want string // "" for no usage error
	}{
		{[]string{"-provider", "anthropic"}, "-provider anthropic: $ANTHROPIC_API_KEY is unset or empty"},
		{[]string{"-provider", "anthropic", "-base-url", "http://127.0.0.1:9/"}, ""},
		{[]string{"-provider", "anthropic", "-api-key-env", "DEMO_TEST_ANTHROPIC_KEY"}, ""},
		{[]string{"-base-url", "https://api.openai.com/v1"}, "-base-url https://api.openai.com/v1: $OPENAI_API_KEY is unset or empty"},
		{[]string{"-base-url", "http://localhost:11434/v1"}, ""},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		var usage *usageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.args, err)
		case tc.want != "" && (!errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
