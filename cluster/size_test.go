package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// childSizeEnv, set (to 1), makes this test binary a cluster member
// (TestClusterSizeChild), configured besides through childSchemaEnv,
// childSideEnv and childMaxFrameEnv.
const childSizeEnv = "POLYWEAVE_CLUSTER_SIZE"

// childMaxFrameEnv is the Options.MaxFrameBytes of TestClusterSizeChild's
// member (0 when unset).
const childMaxFrameEnv = "POLYWEAVE_CLUSTER_MAX_FRAME"

// sizeHold is the Hold of the size test's member and client: a request
// is sent again (all of it) every Hold while its session runs, so this
// is long.
const sizeHold = 10 * time.Second

// answerPrefix names the sessions whose answer is large: session
// "answer-N" answers N bytes.
const answerPrefix = "answer-"

// TestClusterSizeChild is a cluster member's body; it does nothing unless
// started by TestMember_LargeFramesCrossMembers. It hosts one-call
// sessions whose answer is "All done.", but for a session "answer-N",
// whose answer is N bytes. It marks "ready ADDRESS HEALTH" once it has
// joined (HEALTH: the host:port of its health checks, on a port it bound
// itself), and leaves when its stdin closes.
func TestClusterSizeChild(t *testing.T) {
	childMain(t, childSizeEnv, runSizeChild)
}

func runSizeChild(t *testing.T, _ string) error {
	maxFrame := 0
	if v := os.Getenv(childMaxFrameEnv); v != "" {
		var err error
		if maxFrame, err = strconv.Atoi(v); err != nil {
			return err
		}
	}
	provider, health := loneProviderAt(t)
	m, err := cluster.Start(&cluster.Options{
		Provider:      provider,
		Store:         openStore(t, os.Getenv(childSchemaEnv)),
		Session:       answerSessions(sideFile(os.Getenv(childSideEnv))),
		Hold:          sizeHold,
		MaxFrameBytes: maxFrame,
	})
	if err != nil {
		return err
	}
	tooltest.Marker()("ready %s %s", m.Address(), health)
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Close(ctx)
}

// answerSessions builds one-call sessions (the append tool, recorded in
// side) whose answer is "All done.", or N bytes for a session
// "answer-N".
func answerSessions(side sideFile) cluster.SessionFunc {
	return func(id string) (actors.Spec, *tools.LoopOptions, error) {
		s := script(1)
		if n, ok := strings.CutPrefix(id, answerPrefix); ok {
			size, err := strconv.Atoi(n)
			if err != nil {
				return actors.Spec{}, nil, err
			}
			s.Turns[len(s.Turns)-1].Text = strings.Repeat("x", size)
		}
		model, err := scripted.New(s, nil)
		if err != nil {
			return actors.Spec{}, nil, err
		}
		return model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Name: "session", Tools: []*tools.Tool{side.appendTool(id, hooks{})}},
			MaxIterations: 2,
		}, nil
	}
}

// largeRequest is a first request whose conversation is one user message
// of size bytes. Its JSON is written out, not marshalled: json.Marshal
// scans every byte of the content, which takes seconds for megabytes
// under the race detector.
func largeRequest(size int) []*messages.Frame {
	msgs := `[{"role":"user","content":"` + strings.Repeat("y", size) + `"}]`
	return []*messages.Frame{messages.RawParam("", models.ParamMessages, json.RawMessage(msgs))}
}

// TestMember_LargeFramesCrossMembers: a member's connections to other
// members carry requests (whole conversations) and answers larger than
// gRPC's default limit of 4 MiB per message, up to the members' frame
// limit (Options.MaxFrameBytes, 8 MiB here), without ending the
// connection (which protoactor takes for the peer gone, losing the
// request: Run asked again until its ctx ended); a burst of requests
// whose sum is over 4 MiB crosses too. A request over the requester's
// frame limit fails Run at once, and so does an answer over its member's
// limit, each with an error wrapping remote.ErrTooLarge. The member is a
// child process; this process is a client.
func TestMember_LargeFramesCrossMembers(t *testing.T) {
	leakCheck(t)
	const maxFrame = 8 << 20
	schema := freshSchema()
	side := newSideFile(t)
	raceLog := filepath.Join(t.TempDir(), "race")
	host := tooltest.StartChild(t, "^TestClusterSizeChild$", childSizeEnv+"=1", childSchemaEnv+"="+schema,
		childSideEnv+"="+string(side), childMaxFrameEnv+"="+strconv.Itoa(maxFrame),
		"POLYWEAVE_TEST_POSTGRES="+dsn, "GORACE=exitcode=0 log_path="+raceLog)
	_, health := readyMark(t, host, "member")
	client := startMember(t, &cluster.Options{Client: true, Store: openStore(t, schema),
		Provider: cluster.Automanaged(0, []string{health}, 100*time.Millisecond),
		Hold:     sizeHold, MaxFrameBytes: maxFrame})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Every Run below gives up after 90 s (a bound on a hang: the
	// runs take long under the race detector on a loaded machine): a
	// request lost with its connection is asked again after Hold +
	// RequestTimeout.
	run := func(id string, request ...*messages.Frame) (*cluster.Result, error) {
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		return client.Run(ctx, id, request...)
	}

	const large = 5 << 20 // over gRPC's default limit
	if res, err := run("request", largeRequest(large)...); err != nil || res.Text != "All done." {
		t.Errorf("Run of a request of %d bytes: %+v, %.300v; want \"All done.\"", large, res, err)
	}
	id := answerPrefix + strconv.Itoa(large)
	if res, err := run(id, firstRequest(id)...); err != nil || len(res.Text) != large {
		t.Errorf("Run of a session whose answer is %d bytes: %.300v; want its answer", large, err)
	}
	// A burst: requests of 1 MiB each, at once.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("burst%d", i)
			if res, err := run(id, largeRequest(1<<20)...); err != nil || res.Text != "All done." {
				t.Errorf("Run %s of a burst of requests of 1 MiB: %+v, %.300v; want \"All done.\"", id, res, err)
			}
		})
	}
	wg.Wait()

	// Over the limits: Run fails at once.
	if _, err := run("over", largeRequest(maxFrame)...); !errors.Is(err, remote.ErrTooLarge) {
		t.Errorf("Run of a request over the client's frame limit: %.300v; want an error wrapping remote.ErrTooLarge", err)
	}
	id = answerPrefix + strconv.Itoa(maxFrame+1)
	if _, err := run(id, firstRequest(id)...); !errors.Is(err, remote.ErrTooLarge) {
		t.Errorf("Run of a session whose answer is over its member's frame limit: %.300v; want an error wrapping remote.ErrTooLarge", err)
	}
	if got := side.runs(t); len(got) != 11 {
		t.Errorf("side effects %v, want one call of each of the 11 sessions that ran", got)
	}
	host.Stop(t)
	checkRaceReports(t, filepath.Dir(raceLog))
}

// TestRun_RequestOverDefaultFrameLimitFailsAtOnce: a member without
// Options.MaxFrameBytes has remote.DefaultMaxFrameBytes for limit: a run
// request over it fails Run at once, with an error wrapping
// remote.ErrTooLarge that gives the sizes, and nothing is run.
func TestRun_RequestOverDefaultFrameLimitFailsAtOnce(t *testing.T) {
	leakCheck(t)
	side := newSideFile(t)
	m := startLoneMember(t, &cluster.Options{Store: openStore(t, freshSchema()), Session: sessionFunc(t, 1, side, nil), Hold: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Run(ctx, "s", largeRequest(remote.DefaultMaxFrameBytes)...)
	if !errors.Is(err, remote.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("frame limit of %d", remote.DefaultMaxFrameBytes)) {
		t.Fatalf("Run of a request over the default frame limit: %.300v; want an error wrapping remote.ErrTooLarge naming the limit %d", err, remote.DefaultMaxFrameBytes)
	}
	if got := side.runs(t); len(got) != 0 {
		t.Errorf("side effects %v, want none", got)
	}
}

// TestStart_RefusesFrameLimitOutOfRange: Options.MaxFrameBytes below 0,
// from 1 to below remote.MinFrameBytes, or over remote.MaxFrameBytesLimit
// fails Start with an error naming the option, and leaves nothing running.
func TestStart_RefusesFrameLimitOutOfRange(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	for _, n := range []int{-1, 1, remote.MaxFrameBytesLimit + 1} {
		m, err := cluster.Start(&cluster.Options{
			Provider: loneProvider(t),
			Store:    store, Session: sessionFunc(t, 1, newSideFile(t), nil), MaxFrameBytes: n,
		})
		if err == nil {
			m.Close(context.Background())
			t.Fatalf("Start with MaxFrameBytes %d succeeded", n)
		}
		if !strings.Contains(err.Error(), "MaxFrameBytes") || !strings.Contains(err.Error(), strconv.Itoa(n)) {
			t.Errorf("Start with MaxFrameBytes %d: %v; want an error naming the option and its value", n, err)
		}
	}
}
