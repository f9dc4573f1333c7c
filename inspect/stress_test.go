package inspect

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// Many adapters record their turns, each on its own goroutine, while
// others fold the log and read the view: every session shows the text
// its current request's response sent, in order, and no frame of
// another turn or adapter (a fold reading frames the observer has
// since moved, overwritten or left behind in a buffer it outgrew would
// show one); at the end, every request and every response's text.
// Turns of many frames grow the observers' buffers between folds (the
// observer's append copies the frames folded, outside in.mu), and
// turns recorded in parts (at Handled) leave several records of an
// adapter in one log.
func TestFold_ConcurrentAdaptersAndReaders(t *testing.T) {
	_, in := newTestInspector(t)
	const adapters, streams, requests = 6, 3, 60
	stream := func(a, s int) string { return "a" + strconv.Itoa(a) + "s" + strconv.Itoa(s) }
	pieces := func(r int) int { return 1 + r*7%23 } // up to 23: some turns outgrow the buffer
	piece := func(r, p int) string { return strconv.Itoa(r) + "." + strconv.Itoa(p) + ";" }
	// check reports what is wrong with the text shown for a request of
	// a session: pieces of one request, from the first, in order.
	check := func(text string) error {
		if text == "" {
			return nil
		}
		parts := strings.Split(strings.TrimSuffix(text, ";"), ";")
		r := strings.SplitN(parts[0], ".", 2)[0]
		for p, part := range parts {
			if part+";" != r+"."+strconv.Itoa(p)+";" {
				return fmt.Errorf("piece %d is %q, want %s.%d", p, part, r, p)
			}
		}
		return nil
	}
	messagesParam := models.EncodeMessages([]models.Message{models.UserMessage("go")})

	var writers, readers sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for a := range adapters {
		writers.Add(1)
		go func() {
			defer writers.Done()
			o := &modelObserver{in: in}
			for r := range requests {
				if r%4 == 3 {
					o = &modelObserver{in: in} // a new incarnation's: its buffer grows anew
				}
				s := stream(a, r%streams)
				o.request(messages.RawParam(s, models.ParamMessages, messagesParam))
				o.request(messages.End(s))
				for p := range pieces(r) {
					o.response(messages.Text(s, piece(r, p)))
					if (p+r)%3 == 2 {
						o.Handled() // the turn ends here; the response goes on in the next
					}
				}
				o.response(messages.End(s))
				o.Handled()
			}
		}()
	}
	for g := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			requestsSeen := map[string]int{}
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if g == 0 {
					in.Snapshot("")
					continue
				}
				id := stream((i+g)%adapters, i%streams)
				d := in.Snapshot(id).Session
				if d == nil {
					continue
				}
				if err := check(d.Response + d.Answer); err != nil {
					fail(fmt.Errorf("session %s shows %q: %v", id, d.Response+d.Answer, err))
					return
				}
				if d.Requests < requestsSeen[id] {
					fail(fmt.Errorf("session %s shows %d requests, after %d", id, d.Requests, requestsSeen[id]))
					return
				}
				requestsSeen[id] = d.Requests
			}
		}()
	}
	writers.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for a := range adapters {
		for s := range streams {
			id := stream(a, s)
			d := in.Snapshot(id).Session
			if d == nil {
				t.Fatalf("session %s not shown", id)
			}
			if want := requests / streams; d.Requests != want {
				t.Errorf("session %s shows %d requests, want %d", id, d.Requests, want)
			}
			last := requests - streams + s
			var want strings.Builder
			for p := range pieces(last) {
				want.WriteString(piece(last, p))
			}
			if d.Response+d.Answer != want.String() {
				t.Errorf("session %s shows %q, want %q", id, d.Response+d.Answer, want.String())
			}
		}
	}
}
