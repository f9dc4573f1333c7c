package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// The command's errors name its flags, not the library's option fields.
func TestRun_ErrorsNameFlags(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	for _, tc := range []struct {
		args       []string
		want       []string
		notOptions string
	}{
		{[]string{"-dir", t.TempDir(), "-http", "0.0.0.0:0"}, []string{"-allow-remote", "-token-env"}, "AllowRemote"},
		{[]string{"-dir", "/usr"}, []string{"-dir /usr is a system directory"}, "AllowSystemRoot"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{})
		var usage *usageError
		if !errors.As(err, &usage) {
			t.Errorf("%v: err = %v, want a usage error", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", tc.args, err, w)
			}
		}
		if strings.Contains(err.Error(), tc.notOptions) {
			t.Errorf("%v: %q names the option field %s", tc.args, err, tc.notOptions)
		}
	}
}
