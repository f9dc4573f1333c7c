package streaming_test

import (
	"context"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/streaming"
)

// An error whose text holds bytes that are not UTF-8 (a server's Latin-1
// message quoted by a library) ends the answer with an ERROR frame that
// can still be marshalled: protobuf refuses such bytes in a string field,
// and frames cross nodes.
func TestSpec_ErrorTextIsValidUTF8(t *testing.T) {
	answer := func(context.Context, *models.Request, func(*messages.Frame)) ([]*messages.Frame, error) {
		return nil, errors.New("upstream said: caf\xe9 ferm\xe9")
	}
	conn, ctx := modeltest.Serve(t, streaming.Spec("model", answer), 10*time.Second)
	req := &models.Request{StreamID: "s1", Params: []models.Param{modeltest.Param(models.ParamMessages, `[]`)}}
	if err := conn.SendAll(req.Frames()...); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := models.ReadResponse(frames)
	if err != nil || !r.Failed || r.Error != "upstream said: caf\uFFFD ferm\uFFFD" {
		t.Fatalf("answer %+v (%v), want the ERROR with the bad bytes replaced", r, err)
	}
	for _, f := range frames {
		if _, err := proto.Marshal(f); err != nil || !utf8.ValidString(f.GetText()) {
			t.Fatalf("frame %v cannot cross a node: %v", f, err)
		}
	}
}
