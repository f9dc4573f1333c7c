package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// Figure 7 with the inspector: the conversation of figure 7 (a) with an
// inspect.Inspector mounted on its runtime (the model adapter decorated,
// the tools wrapped, OnToolResult given) and served over HTTP to one
// client following the page's event stream (the HTML fragments, at most
// 4 a second), against the same conversation without it, in the same
// run. Goal ≤ 1.1×.

// newInspectedConversation is newLoopConversation with an inspector of
// its runtime, served to one event stream client (client); close stops
// those.
func newInspectedConversation() (lc *loopConversation, client *streamClient, close func(), err error) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*loopConversation, *streamClient, func(), error) {
		rt.Close(context.Background())
		return nil, nil, nil, err
	}
	in, err := inspect.New(rt, nil)
	if err != nil {
		return fail(err)
	}
	model, err := scripted.New(conversationScript(), &scripted.Options{MaxRecorded: -1})
	if err != nil {
		return fail(err)
	}
	toolset, err := in.Tools(noopTools(true))
	if err != nil {
		return fail(err)
	}
	loop, err := tools.NewLoop(in.Model(model.Spec("model")), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: toolset},
		MaxIterations: 10,
		OnToolResult:  in.OnToolResult,
	})
	if err != nil {
		return fail(err)
	}
	conn, err := rt.Start(loop)
	if err != nil {
		return fail(err)
	}
	srv := httptest.NewServer(in)
	ctx, cancel := context.WithCancel(context.Background())
	hc := &http.Client{Transport: &http.Transport{}}
	following := make(chan error, 1)
	client = &streamClient{got: make(chan struct{}, 1)}
	events := make(chan struct{}, 1)
	go func() { following <- client.follow(ctx, hc, srv.URL+"/api/events?view=html", events) }()
	closeAll := func() {
		cancel()
		in.Close()
		<-following
		srv.Close()
		hc.CloseIdleConnections()
	}
	select { // the client is connected and has its first event
	case <-events:
	case err := <-following:
		following <- err
		closeAll()
		return fail(fmt.Errorf("event stream client: %w", err))
	}
	request := models.EncodeMessages([]models.Message{models.UserMessage(userPrompt)})
	return &loopConversation{rt: rt, conn: conn, request: request}, client, closeAll, nil
}

// streamClient is the event stream's client: it reads the events as a
// page would, keeps the newest, and tells a caller when an event shows
// a session (see showing).
type streamClient struct {
	mu     sync.Mutex
	newest string        // the data of the newest event read
	want   string        // what the event a caller waits for contains, or ""
	got    chan struct{} // gets a value when an event contains want
}

// showing waits until the client has read an event whose session list
// shows the session id (at once if the newest does): once the inspector
// has sent what it saw of that session, and the client has read it.
// It is how a measurement waits for the inspector's stream to have done
// the work a run made for it, through the stream itself: the stream
// sends a changed view at most every Interval, so this takes up to an
// Interval of wall time, most of it idle.
func (c *streamClient) showing(ctx context.Context, id string) error {
	want := `data-session=\"` + id + `\"` // the list's markup, in the event's JSON
	c.mu.Lock()
	if strings.Contains(c.newest, want) {
		c.mu.Unlock()
		return nil
	}
	c.want = want
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, streamWait)
	defer cancel()
	select {
	case <-c.got:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.want = ""
		c.mu.Unlock()
		return fmt.Errorf("no event of the inspector's stream showed session %s within %v", id, streamWait)
	}
}

// streamWait bounds how long showing waits: the stream sends a changed
// view every Interval, and a view anyway every second.
const streamWait = 30 * time.Second

// follow reads the event stream at url until ctx ends, signalling events
// for each event read (without blocking).
func (c *streamClient) follow(ctx context.Context, client *http.Client, url string, events chan<- struct{}) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			c.mu.Lock()
			c.newest = data
			if c.want != "" && strings.Contains(data, c.want) {
				c.want = ""
				select {
				case c.got <- struct{}{}:
				default:
				}
			}
			c.mu.Unlock()
		}
		if strings.HasPrefix(line, "event: ") {
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}
}

// benchInspected measures runs of the figure 7 (a) conversation with the
// inspector mounted and followed.
func benchInspected(b *testing.B) {
	lc, _, closeInspector, err := newInspectedConversation()
	if err != nil {
		b.Fatal(err)
	}
	defer closeInspector()
	benchRuns(b, lc) // closes lc
}

// benchUninspected is the same conversation without the inspector (the
// baseline of benchInspected, measured the same way).
func benchUninspected(b *testing.B) {
	lc, err := newTappedConversation(true, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchRuns(b, lc)
}

// inspectorInterval is the event stream's shortest interval, for the note.
const inspectorInterval = inspect.DefaultInterval

func figureInspector(c *config) []Row {
	return c.rows([]pair{
		{figure: "7", name: "(a) inspector mounted, one event stream client vs without", kind: duration, unit: "run",
			ours: benchSide("inspected", benchInspected), base: benchSide("without", benchUntraced), goal: info,
			note: fmt.Sprintf("the client follows the page's stream (HTML fragments, every %v at most); each side measured for a whole round, one after the other, which keeps the garbage collector and the inspector's background work on its side but moves ±15 %% a round (see the interleaved row, which carries the goal)", time.Duration(inspectorInterval))},
	})
}
