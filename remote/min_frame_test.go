package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// TestFrameLimitBelowMinimum: a frame limit from 1 to below
// remote.MinFrameBytes, too small for the protocol's own answers, is
// refused by NewClient, Serve and MessageLimits with an error naming the
// option and the minimum, before anything starts; MinFrameBytes itself
// is taken.
func TestFrameLimitBelowMinimum(t *testing.T) {
	echo := tools.MustNew(tools.Definition{Name: "echo", Handler: func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }})
	minimum := fmt.Sprint(remote.MinFrameBytes)
	refused := func(what string, err error, option string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), option) || !strings.Contains(err.Error(), minimum) {
			t.Errorf("%s: %v, want an error naming %s and the minimum %s", what, err, option, minimum)
		}
	}
	for _, n := range []int{1, 1000, remote.MinFrameBytes - 1} {
		c, err := remote.NewClient(&remote.ClientOptions{MaxFrameBytes: n})
		if c != nil {
			_ = c.Close(t.Context())
		}
		refused(fmt.Sprintf("NewClient with MaxFrameBytes %d", n), err, "ClientOptions.MaxFrameBytes")
		node, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{echo}, MaxFrameBytes: n})
		if node != nil {
			_ = node.Close(t.Context())
		}
		refused(fmt.Sprintf("Serve with MaxFrameBytes %d", n), err, "NodeOptions.MaxFrameBytes")
		_, err = remote.MessageLimits(n)
		refused(fmt.Sprintf("MessageLimits(%d)", n), err, "frame limit")
	}
	// The minimum itself is taken: Serve goes on to check the tool's
	// description against it (a node started here would be a second
	// protoactor remote in this process: see envNode).
	wordy := tools.MustNew(tools.Definition{Name: "wordy", Description: strings.Repeat("w", remote.MinFrameBytes)})
	node, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{wordy}, MaxFrameBytes: remote.MinFrameBytes})
	if node != nil {
		_ = node.Close(t.Context())
	}
	if !errors.Is(err, remote.ErrTooLarge) || strings.Contains(err.Error(), "MaxFrameBytes") {
		t.Errorf("Serve with MaxFrameBytes MinFrameBytes and a description over it: %v; want the description refused, not the option", err)
	}
	if _, err := remote.MessageLimits(remote.MinFrameBytes); err != nil {
		t.Errorf("MessageLimits(MinFrameBytes): %v", err)
	}
}
