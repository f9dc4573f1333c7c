package remote_test

import (
	"testing"

	"golang.org/x/net/http2"

	"github.com/polyweave/polyweave-go/remote"
)

// TestNode_RefusesMessageClaimOverReceiveLimit: the documented receive
// limit is 64 MiB, with at most remote.StreamsPerConnection streams per
// connection: a claim one byte over the limit ends its stream with
// RESOURCE_EXHAUSTED at once, before anything is set aside for it (the
// node passes such a claim on to gRPC, which checks the claim first).
func TestNode_RefusesMessageClaimOverReceiveLimit(t *testing.T) {
	const documented = 64 << 20
	if remote.ReceiveLimit != documented {
		t.Fatalf("receive limit %d, the docs say %d", remote.ReceiveLimit, documented)
	}
	// The node runs in a child process: a second remote in this one would
	// race with the shared client's on gRPC's global logger.
	node := startNode(t, remote.DefaultAddress)

	c := dialRaw(t, node.addr)
	const streams = 4
	for i := range streams {
		id := uint32(2*i + 1)
		c.open(t, id)
		c.claim(t, id, documented+1, 0)
	}
	fr := c.fr
	maxStreams, sawSettings := uint32(0), false
	refused := map[uint32]string{}
	for len(refused) < streams {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%d of %d streams refused before: %v", len(refused), streams, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				sawSettings = true
				maxStreams, _ = f.Value(http2.SettingMaxConcurrentStreams)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				got := headerValue(f, "grpc-status")
				refused[f.StreamID] = got
				if got != "8" { // RESOURCE_EXHAUSTED
					t.Errorf("stream %d ended with grpc-status %q, want 8 (RESOURCE_EXHAUSTED)", f.StreamID, got)
				}
			}
		case *http2.RSTStreamFrame:
			// gRPC resets a stream it has answered whose peer has not
			// finished sending.
			if _, answered := refused[f.StreamID]; !answered {
				t.Errorf("stream %d reset (%v) without a status, want refused with one", f.StreamID, f.ErrCode)
				refused[f.StreamID] = "reset"
			}
		}
	}
	if !sawSettings || maxStreams != remote.StreamsPerConnection {
		t.Errorf("node's SETTINGS_MAX_CONCURRENT_STREAMS = %d (sent: %v), want %d", maxStreams, sawSettings, remote.StreamsPerConnection)
	}
}

// headerValue is the value of the field name of f ("" when there is none).
func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.RegularFields() {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}
