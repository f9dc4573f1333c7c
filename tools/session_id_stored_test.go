package tools_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestMoveSession_FromAnIDTooLongForEveryStore: boltstore takes names
// far longer than durability.MaxNameLen, and earlier versions kept
// sessions under ids that long there. Such a session is still read, and
// moved to an id that fits every store (what MoveSession is for); a
// move to an id too long is refused up front, saying the lengths, and
// leaves the session where it was.
func TestMoveSession_FromAnIDTooLongForEveryStore(t *testing.T) {
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	long := strings.Repeat("l", tools.MaxSessionIDLen+100)
	putSession(t, store, &messages.LoopSession{SessionId: long, FirstRequest: []byte(`[]`), Text: "kept"})

	if st, ok, err := tools.ReadSession(testCtx(t), store, long); err != nil || !ok || st.GetText() != "kept" {
		t.Fatalf("ReadSession of a session stored under an id of %d bytes: %v, %v, %v; want it read", len(long), st, ok, err)
	}
	moved, err := tools.MoveSession(testCtx(t), store, long, long+"x")
	if moved || !errors.Is(err, durability.ErrInvalidName) || len(err.Error()) > 600 {
		t.Fatalf("MoveSession to an id of %d bytes: %v, %v; want durability.ErrInvalidName, short", len(long)+1, moved, err)
	}
	for _, says := range []int{len(long) + 1, durability.MaxNameLen, tools.MaxSessionIDLen} {
		if !strings.Contains(err.Error(), strconv.Itoa(says)) {
			t.Errorf("MoveSession to an id of %d bytes: %q does not say %d", len(long)+1, err, says)
		}
	}
	if moved, err := tools.MoveSession(testCtx(t), store, long, "short"); err != nil || !moved {
		t.Fatalf("MoveSession of a session stored under an id of %d bytes to one that fits: %v, %v", len(long), moved, err)
	}
	if st, ok, err := tools.ReadSession(testCtx(t), store, "short"); err != nil || !ok || st.GetText() != "kept" {
		t.Errorf("the moved session: %v, %v, %v", st, ok, err)
	}
	if _, ok, err := tools.ReadSession(testCtx(t), store, long); err != nil || ok {
		t.Errorf("under its old id after the move: %v, %v; want nothing", ok, err)
	}
}

// TestSessionOptions_IDNotUTF8: a session's ID is written in its events
// as a protobuf string, which must be valid UTF-8: NewLoop refuses
// another up front, with an error wrapping durability.ErrInvalidName,
// rather than the loop failing at its first write.
func TestSessionOptions_IDNotUTF8(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "x"}}}, nil)
	_, err := tools.NewLoop(model.Spec("m"), &tools.LoopOptions{Session: &tools.SessionOptions{ID: "s\xff", Store: store}})
	if !errors.Is(err, durability.ErrInvalidName) || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("an id not UTF-8: %v; want durability.ErrInvalidName, saying UTF-8", err)
	}
}

// TestSession_ErrorsQuoteIDClipped: the errors of a session quote its ID
// clipped, whole characters only, with its length: an ID may be a
// thousand bytes long.
func TestSession_ErrorsQuoteIDClipped(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	id := "a" + strings.Repeat("é", 500) // odd: a cut at a byte count falls inside an é
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "Hi."}}}, nil)
	rt := newRuntime(t)
	for n, msgs := range []string{`[{"role":"user","content":"hi"}]`, `[{"role":"user","content":"else"}]`} {
		loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: "loop-" + strconv.Itoa(n)},
			Session: &tools.SessionOptions{ID: id, Store: store}})
		if err != nil {
			t.Fatal(err)
		}
		conn := start(t, rt, loop)
		send(t, conn, messages.RawParam("a", models.ParamMessages, json.RawMessage(msgs)), messages.End("a"))
		got, err := conn.RecvStream(testCtx(t), "a")
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if len(got) == 0 || got[0].GetType() != messages.FrameType_ERROR || !strings.Contains(got[0].GetText(), "different request") {
				t.Fatalf("another first request: %q; want its refusal", lines(got))
			}
			clipped(t, got[0].GetText(), len(id))
		}
	}
	_, err := tools.MoveSession(testCtx(t), store, id, id+strings.Repeat("é", 300))
	if err == nil {
		t.Fatal("a move to an id too long was not refused")
	}
	clipped(t, err.Error(), len(id))
}

// clipped fails unless msg is short, says the length n of what it
// clipped, and quotes whole UTF-8 characters (%q escapes the bytes of a
// cut one).
func clipped(t *testing.T, msg string, n int) {
	t.Helper()
	if len(msg) > 700 || !strings.Contains(msg, strconv.Itoa(n)) || !utf8.ValidString(msg) || strings.Contains(msg, `\x`) {
		t.Errorf("%q: want it short, saying %d, with whole characters", msg, n)
	}
}
