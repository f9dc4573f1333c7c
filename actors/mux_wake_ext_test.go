package actors_test

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_OpenWakeReadsTheWholeStream checks that a stream opened with a
// wake function that accepts only END still reads every frame, in order,
// with frames of other streams of the Mux left to their own readers.
func TestMux_OpenWakeReadsTheWholeStream(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := testCtx(t)
	mux, err := rt.StartMux(upper())
	if err != nil {
		t.Fatal(err)
	}
	s, err := mux.OpenWake("s1", func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END })
	if err != nil {
		t.Fatal(err)
	}
	other, err := mux.Open("s2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendAll(messages.Text("s1", "a"), messages.Text("s2", "x"), messages.Text("s1", "b"), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	var got []*messages.Frame
	for len(got) < 3 {
		f, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if !slices.Equal(texts(got), []string{"A", "B", "<END>"}) {
		t.Fatalf("stream read %q", texts(got))
	}
	f, err := other.Recv(ctx)
	if err != nil || f.GetText() != "X" {
		t.Fatalf("the other stream read %q, %v", f.GetText(), err)
	}
	if err := mux.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
