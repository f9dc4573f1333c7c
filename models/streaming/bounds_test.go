package streaming_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/streaming"
)

func TestBounds_IdleAndTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, ctx := streaming.Bound(context.Background(), 10*time.Second, 3*time.Second)
		defer b.Release()
		for range 4 { // touched every 2 s: the idle bound never fires
			time.Sleep(2 * time.Second) // fake time inside the bubble
			if ctx.Err() != nil {
				t.Fatalf("cancelled after a touch: %v", context.Cause(ctx))
			}
			b.Touch()
		}
		<-ctx.Done() // 10 s: the total bound
		if err := b.Fail("read", errors.New("x")); !strings.Contains(err.Error(), "no complete answer within 10s") {
			t.Fatalf("error %v", err)
		}

		b2, ctx2 := streaming.Bound(context.Background(), time.Minute, 3*time.Second)
		defer b2.Release()
		<-ctx2.Done()
		if err := b2.Fail("read", errors.New("x")); !strings.Contains(err.Error(), "no data from the server for 3s") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestBounds_BodyTouches: every read of the body that returns bytes
// touches the idle bound; once the bytes stop, it fires.
func TestBounds_BodyTouches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, ctx := streaming.Bound(context.Background(), time.Minute, 3*time.Second)
		defer b.Release()
		r, w := io.Pipe()
		body := b.Body(r)
		go func() {
			for range 5 { // a byte every 2 s: 10 s without an event
				time.Sleep(2 * time.Second)
				_, _ = w.Write([]byte(":"))
			}
		}()
		buf := make([]byte, 8)
		for range 5 {
			if _, err := body.Read(buf); err != nil {
				t.Fatal(err)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("cancelled while bytes arrived: %v", context.Cause(ctx))
		}
		<-ctx.Done()
		if err := b.Fail("read", errors.New("x")); !strings.Contains(err.Error(), "no data from the server for 3s") {
			t.Fatalf("error %v", err)
		}
		_ = body.Close()
		_ = w.Close()
	})
}
