package agent_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// longestStoredName is the longest name, as a key writes it, that an
// agent with a Store takes: it leaves room for a session id of one byte
// in the key of its calls held for approval ("<name>/<id>/approvals").
var longestStoredName = durability.MaxNameLen - len("/x") - len(tools.ApprovalStoreSuffix)

// TestNew_NameLeavesNoRoomForSessions: with a Store, New refuses a Name
// whose key leaves no room for any session id within
// durability.MaxNameLen, counting the name as the key writes it ('/' as
// %2F), with an error wrapping durability.ErrInvalidName that says the
// name's length, its length in a key, the limit and the key's shape, and
// quotes the name clipped; the name is not taken on the Store.
func TestNew_NameLeavesNoRoomForSessions(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	for _, name := range []string{
		strings.Repeat("n", longestStoredName+1),
		strings.Repeat("a/", longestStoredName/4+1), // half its bytes, the whole in a key
	} {
		inKey := len(agent.SessionKey(name, "")) - len("/")
		for range 2 { // refused again the same way: nothing was claimed
			a, err := agent.New(rt, model(t, scripted.Turn{Text: "Hi."}), &agent.Options{Name: name, Store: store})
			if err == nil {
				a.Close(testCtx(t))
				t.Fatalf("a name of %d bytes (%d in a key) was taken with a Store", len(name), inKey)
			}
			msg := err.Error()
			if !errors.Is(err, durability.ErrInvalidName) || errors.Is(err, agent.ErrNameTaken) || len(msg) > 600 {
				t.Fatalf("a name of %d bytes (%d in a key): %v, want durability.ErrInvalidName, short", len(name), inKey, err)
			}
			for _, says := range []string{strconv.Itoa(len(name)), strconv.Itoa(inKey),
				strconv.Itoa(durability.MaxNameLen), strconv.Itoa(longestStoredName), tools.ApprovalStoreSuffix} {
				if !strings.Contains(msg, says) {
					t.Errorf("a name of %d bytes: %q does not say %s", len(name), msg, says)
				}
			}
		}
	}
}

// TestNew_LongestNameWithStore: the longest name New takes with a Store
// runs the one session id that fits (one byte) and refuses a longer one
// with ErrInvalidSessionID; without a Store any name is taken, and the
// errors of its agent quote it clipped.
func TestNew_LongestNameWithStore(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	name := strings.Repeat("n", longestStoredName)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hi."}), &agent.Options{Name: name, Store: store})
	if ans, err := a.Run(testCtx(t), "x", ask); err != nil || ans.Text != "Hi." {
		t.Fatalf("the session of a one-byte id: %+v, %v", ans, err)
	}
	if _, err := a.Run(testCtx(t), "xy", ask); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Fatalf("a two-byte id: %v, want ErrInvalidSessionID", err)
	}

	huge := strings.Repeat("é", 2*durability.MaxNameLen)
	b := newAgent(t, rt, model(t, scripted.Turn{Text: "Hi."}), &agent.Options{Name: huge})
	if ans, err := b.Run(testCtx(t), "s", ask); err != nil || ans.Text != "Hi." {
		t.Fatalf("an agent named with %d bytes, no Store: %+v, %v", len(huge), ans, err)
	}
	_, err := b.Run(testCtx(t), "s", nil)
	if !errors.Is(err, agent.ErrNoMessages) {
		t.Fatalf("no messages: %v, want ErrNoMessages", err)
	}
	quoted(t, err.Error(), len(huge))
}

// TestErrors_QuoteNamesClipped: the errors of the package quote names and
// session ids clipped, whole characters only, with the length cut.
func TestErrors_QuoteNamesClipped(t *testing.T) {
	long := "a" + strings.Repeat("é", 600) // odd: a cut at a byte count falls inside an é
	quoted(t, (&agent.FailedError{Agent: long, Session: long, Attempts: 1, Reason: "boom"}).Error(), len(long))
	quoted(t, (&agent.WaitingError{Agent: long, Session: long}).Error(), len(long))

	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hi."}), nil)
	_, err := a.Run(testCtx(t), long, ask)
	if !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Fatalf("an id of %d bytes: %v, want ErrInvalidSessionID", len(long), err)
	}
	quoted(t, err.Error(), len(long))
}

// quoted fails unless msg is short, says the length of what it clipped,
// and quotes whole UTF-8 characters (%q escapes the bytes of a cut one).
func quoted(t *testing.T, msg string, n int) {
	t.Helper()
	if len(msg) > 600 || !strings.Contains(msg, strconv.Itoa(n)) || !utf8.ValidString(msg) || strings.Contains(msg, `\x`) {
		t.Errorf("%q: want it short, saying %d, with whole characters", msg, n)
	}
}
