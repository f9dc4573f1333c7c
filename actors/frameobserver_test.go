package actors_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// recordingObserver writes what it sees into a log shared by the
// incarnations of one duplex.
type recordingObserver struct {
	n   int // the incarnation
	mu  *sync.Mutex
	log *[]string
}

func (o *recordingObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	*o.log = append(*o.log, fmt.Sprintf("%d ", o.n)+fmt.Sprintf(format, args...))
}

// ownMsg is a message of the observer's own: it answers it by emitting,
// and keeps it from the Logic.
type ownMsg struct{ stream string }

func (o *recordingObserver) Received(c actors.Context, msg any) bool {
	switch m := msg.(type) {
	case actors.Started:
		o.add("started %s", c.Self().String())
	case *messages.Frame:
		o.add("received %s %s", m.GetType(), m.GetText())
	case ownMsg:
		o.add("own")
		c.Emit(messages.Text(m.stream, "from the observer"))
		c.Emit(messages.End(m.stream))
		return false
	default:
		o.add("received %T", msg)
	}
	return true
}

func (o *recordingObserver) Emitted(f *messages.Frame) bool {
	o.add("emitted %s %s", f.GetType(), f.GetText())
	return f.GetText() != "hidden"
}

func (o *recordingObserver) Handled()        { o.add("handled") }
func (o *recordingObserver) Ended(err error) { o.add("ended %v", errors.Is(err, actors.ErrStopped)) }

// observedShouter upper-cases TEXT, answers END with END, emits "hidden"
// before every answer, and panics on "crash".
func observedShouter(mu *sync.Mutex, log *[]string) actors.Spec {
	n := 0
	return actors.Spec{
		Name: "shouter",
		New: func() actors.Logic {
			return actors.LogicFunc(func(c actors.Context, msg any) {
				f, ok := msg.(*messages.Frame)
				if !ok {
					if _, own := msg.(ownMsg); own {
						panic("the observer's message reached the Logic")
					}
					return
				}
				switch f.GetType() {
				case messages.FrameType_TEXT:
					if f.GetText() == "crash" {
						panic("asked to crash")
					}
					c.Emit(messages.Text(f.GetStreamId(), "hidden"))
					c.Emit(messages.Text(f.GetStreamId(), strings.ToUpper(f.GetText())))
				case messages.FrameType_END:
					c.Emit(messages.End(f.GetStreamId()))
				}
			})
		},
		Observe: func() actors.FrameObserver {
			n++ // called on the duplex's actor, one incarnation after another
			return &recordingObserver{n: n, mu: mu, log: log}
		},
	}
}

// TestFrameObserver_SeesEachFrameOnce: an observer sees, in order and
// once each, what the Logic receives and emits and the end of each turn;
// it keeps a frame from going out when it says so, and a message of its
// own from the Logic; a restart ends its incarnation (Ended) and the next
// incarnation gets an observer of its own, which does not see the ERROR
// and END the runtime closes the failed call with.
func TestFrameObserver_SeesEachFrameOnce(t *testing.T) {
	rt := newRuntime(t, nil)
	var mu sync.Mutex
	var log []string
	conn, err := rt.Start(observedShouter(&mu, &log))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	texts := func(fs []*messages.Frame) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.GetType().String()+" "+f.GetText())
		}
		return out
	}
	if err := conn.SendAll(messages.Text("a", "hi"), messages.End("a")); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"TEXT HI", "END "}; !slices.Equal(texts(got), want) {
		t.Fatalf("stream a: got %q, want %q (the hidden frame dropped)", texts(got), want)
	}
	if err := conn.Send(messages.Text("b", "crash")); err != nil {
		t.Fatal(err)
	}
	if got, err = conn.RecvStream(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].GetType() != messages.FrameType_ERROR {
		t.Fatalf("stream b: got %q, want ERROR and END", texts(got))
	}
	rt.System().Root.Send(conn.Ref().PID(), ownMsg{stream: "c"})
	if got, err = conn.RecvStream(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"TEXT from the observer", "END "}; !slices.Equal(texts(got), want) {
		t.Fatalf("stream c: got %q, want %q", texts(got), want)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	id := conn.Ref().String()
	want := []string{
		"1 started " + id, "1 handled",
		"1 received TEXT hi", "1 emitted TEXT hidden", "1 emitted TEXT HI", "1 handled",
		"1 received END ", "1 emitted END ", "1 handled",
		"1 received TEXT crash", // failed: no Handled
		"1 ended false",
		"2 started " + id, "2 handled",
		"2 own", "2 emitted TEXT from the observer", "2 emitted END ", "2 handled",
		"2 ended true",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(log, want) {
		t.Errorf("observed:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}
