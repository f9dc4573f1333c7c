package httpadapter_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
)

// reached returns err and every error errors.Is and errors.As reach
// under it.
func reached(err error) []error {
	if err == nil {
		return nil
	}
	all := []error{err}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		all = append(all, reached(e.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			all = append(all, reached(inner)...)
		}
	}
	return all
}

var errSentinel = errors.New("sentinel of the adapter")

// scrubbedErr is an adapter's error with its credentials cut out.
type scrubbedErr struct{ Status int }

func (e *scrubbedErr) Error() string { return fmt.Sprintf("status %d", e.Status) }

// TestAnswer_ChainUnderTheTextIsScrubbed: the errors a caller reaches
// under the error of an answer (by errors.Unwrap or errors.As) do not
// hold what its text cuts out: an *url.Error naming the URL with its user
// info is not among them. errors.Is still finds
// context.Canceled and an adapter's sentinels, models.IsPermanent the
// mark, and errors.As the adapter's errors marked as scrubbed.
func TestAnswer_ChainUnderTheTextIsScrubbed(t *testing.T) {
	const password = "pw-secret-0123456789"
	base := "http://me:" + password + "@example.invalid/v1"
	for _, permanent := range []bool{false, true} {
		t.Run(fmt.Sprint("permanent=", permanent), func(t *testing.T) {
			e := httpadapter.Open(httpadapter.Config{BaseURL: base})
			defer e.Close()
			answer := e.Answer(func(*models.Request) ([]byte, error) { return nil, nil },
				func(ctx context.Context, _ string, _ []byte, _ func(*messages.Frame)) ([]*messages.Frame, error) {
					u := &url.Error{Op: "Post", URL: base + "/chat/completions", Err: context.Canceled}
					err := fmt.Errorf("request: %w (%w) %w", u, errSentinel, httpadapter.Scrubbed(&scrubbedErr{Status: 401}))
					if permanent {
						err = models.Permanent(err)
					}
					return nil, err
				})
			_, err := answer(context.Background(), &models.Request{StreamID: "s1"}, func(*messages.Frame) {})
			if err == nil {
				t.Fatal("no error")
			}
			for _, e := range reached(err) {
				if text := e.Error(); strings.Contains(text, password) {
					t.Errorf("an error under the answer's (%T) shows a credential: %q", e, text)
				}
			}
			if u := (*url.Error)(nil); errors.As(err, &u) {
				t.Errorf("errors.As reaches the *url.Error, URL %q", u.URL)
			}
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errSentinel) {
				t.Errorf("error %q: errors.Is no longer finds context.Canceled or the sentinel", err)
			}
			if models.IsPermanent(err) != permanent {
				t.Errorf("IsPermanent = %v, want %v", !permanent, permanent)
			}
			if s := (*scrubbedErr)(nil); !errors.As(err, &s) || s.Status != 401 {
				t.Errorf("error %q: errors.As does not reach the error marked scrubbed", err)
			}
		})
	}
}
