package remote

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"

	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
)

// readCounter is an incoming stream whose reads return at once, counted.
type readCounter struct {
	grpc.ServerStream
	ctx   context.Context
	reads atomic.Int32
}

func (s *readCounter) Context() context.Context { return s.ctx }
func (s *readCounter) RecvMsg(any) error        { s.reads.Add(1); return nil }

// answerTo is a batch of one answer to a request that came over conn.
func answerTo(conn string) *paremote.MessageBatch {
	return &paremote.MessageBatch{Envelopes: []*paremote.MessageEnvelope{
		{MessageHeader: &paremote.MessageHeader{HeaderData: map[string]string{connHeader: conn}}}}}
}

// TestLoads_ReadingWaitsWhileAnswersWait: once as many answers to a
// caller's connection wait to go out as the node's limit, the node stops
// reading that connection (its next read waits), and reads it again once
// one has gone out (gRPC took its batch), or once they are lost with the
// connection to the caller; another caller's connection is read on.
func TestLoads_ReadingWaitsWhileAnswersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoads(2)
		g := &guard{log: slog.New(slog.DiscardHandler), tag: true, wait: l.wait}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		slow := &guardedStream{ServerStream: &readCounter{ctx: ctx}, g: g, conn: "slow"}
		other := &guardedStream{ServerStream: &readCounter{ctx: ctx}, g: g, conn: "other"}
		reads := func(s *guardedStream) int32 { return s.ServerStream.(*readCounter).reads.Load() }
		read := func(s *guardedStream) chan error {
			done := make(chan error, 1)
			go func() { done <- s.RecvMsg(&paremote.RemoteMessage{}) }()
			return done
		}
		l.queue("slow", "caller:1")
		l.queue("slow", "caller:1")
		done := read(slow)
		if err := <-read(other); err != nil || reads(other) != 1 {
			t.Fatalf("another caller's connection: read %d times (%v), want once", reads(other), err)
		}
		synctest.Wait()
		if reads(slow) != 0 {
			t.Fatal("the connection was read with as many answers waiting as the limit")
		}
		l.sent("caller:1", answerTo("other")) // not the slow caller's
		synctest.Wait()
		if reads(slow) != 0 {
			t.Fatal("the connection was read when another caller's answer went out")
		}
		l.sent("caller:1", answerTo("slow"))
		if err := <-done; err != nil || reads(slow) != 1 {
			t.Fatalf("once an answer went out: read %d times (%v), want once", reads(slow), err)
		}
		l.queue("slow", "caller:1")
		done = read(slow)
		synctest.Wait()
		if reads(slow) != 1 {
			t.Fatal("the connection was read again with as many answers waiting as the limit")
		}
		l.lost("caller:1")
		if err := <-done; err != nil || reads(slow) != 2 {
			t.Fatalf("once the answers were lost with their connection: read %d times (%v), want twice", reads(slow), err)
		}
		// A read waiting when the stream ends fails with it.
		l.queue("slow", "caller:2")
		l.queue("slow", "caller:2")
		done = read(slow)
		synctest.Wait()
		cancel()
		if err := <-done; err == nil {
			t.Error("a read waiting when its stream ended: no error")
		}
	})
}
