package remote

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
)

// A guard that serves no incoming stream as it stops has none to wait
// for: the channel that stop returns is closed already, so that a Close
// whose ctx has ended does not report streams still going.
func TestGuard_StopWithNoStreamIsDone(t *testing.T) {
	g := &guard{}
	select {
	case <-g.stop():
	default:
		t.Fatal("stop of a guard serving no stream: its streams have not ended, want ended at once")
	}
}

// Stop's channel is closed once the streams the guard serves have ended,
// not before; a stream that opens after stop is refused without being
// served.
func TestGuard_StopWaitsForTheStreamsItServes(t *testing.T) {
	g := &guard{}
	serving, release := make(chan struct{}), make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		returned <- g.interceptStream(nil, &queuedStream{}, nil, func(any, grpc.ServerStream) error {
			close(serving)
			<-release
			return nil
		})
	}()
	<-serving
	ended := g.stop()
	select {
	case <-ended:
		t.Fatal("stop's channel closed while a stream is still served")
	default:
	}
	err := g.interceptStream(nil, &queuedStream{}, nil, func(any, grpc.ServerStream) error {
		t.Error("a stream opened after stop was served")
		return nil
	})
	if !errors.Is(err, errStopping) {
		t.Errorf("a stream opened after stop: %v, want errStopping", err)
	}
	close(release)
	if err := <-returned; err != nil {
		t.Errorf("the stream served: %v", err)
	}
	<-ended
	select {
	case <-g.stop():
	default:
		t.Error("a second stop, once the streams have ended: not ended at once")
	}
}
