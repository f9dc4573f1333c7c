package remote

import (
	"errors"
	"fmt"

	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// Sizes on the wire.
//
// Protoactor's endpoint writer sends the messages queued for a peer in
// batches, each one gRPC message; gRPC refuses a message over its
// receiver's limit by ending the whole connection, which protoactor then
// reports as the peer gone, losing every message of the batch (some of
// which may have been delivered in earlier batches and run). So the
// size of what one connection carries is bounded at both ends:
//
//   - one frame (a call with its arguments, a result) is at most
//     MaxFrameBytes (of the sender's options), checked by the sender
//     before it sends: a call too large is answered at once with an error
//     of kind [KindTooLarge] and not sent; a result too large is replaced
//     by such an error, so the call still gets its one result;
//   - a batch holds at most batchSize(MaxFrameBytes) messages, so a full
//     batch of frames of the largest size fits in maxMessageBytes;
//   - every node and client accepts (and sends) gRPC messages of up to
//     maxMessageBytes (64 MiB), whatever its own MaxFrameBytes, so peers
//     with different frame limits still agree on the wire.
//
// gRPC reads a message's length first and sets aside that much before
// the message arrives; the servers of nodes and clients hold a message's
// frames back from gRPC until the whole message is there (see conns.go),
// so a peer that claims a message of the limit and never sends it makes
// them hold only what it sent, and a connection at most one message of
// the limit. The limit trades that against batching: 64 MiB holds 15
// frames of the default 4 MiB (and a thousand small ones) in one batch.
// Without TLS, nodes and clients have no authentication: whoever reaches
// their port can open connections (MaxConnsPerPeer of them per IP
// address), which is one reason they listen on loopback addresses unless
// AllowRemote; with TLS, only peers with a certificate from its CAs can.

// DefaultMaxFrameBytes bounds one frame (a call with its arguments, a
// result) a node or client sends unless its options say otherwise.
const DefaultMaxFrameBytes = 4 << 20

// MinFrameBytes is the smallest MaxFrameBytes a node or client (or
// MessageLimits) takes: a frame limit must leave room for the protocol's
// own answers, which repeat their request's ids (up to 1 KiB each, see
// Sizes above) with a tool's name and a message, and for a DESCRIBE's
// answer, a tool's description with the caller's stream id.
const MinFrameBytes = 4 << 10

// maxMessageBytes is the largest gRPC message the nodes and clients send
// and receive: a batch of protoactor's endpoint writer. It bounds what
// one connection can make its receiver hold (see Sizes above).
const maxMessageBytes = 64 << 20

// Room for what a batch holds beside its frames: per envelope (its
// indexes, a header, a new target and sender PID) and per batch (its
// type names, the message's own framing).
const (
	envelopeOverhead = 1 << 10
	batchOverhead    = 64 << 10
)

// MaxFrameBytesLimit is the largest MaxFrameBytes a node or client takes:
// a frame of this size fills a gRPC message of the wire's limit on its
// own.
const MaxFrameBytesLimit = maxMessageBytes - batchOverhead - envelopeOverhead

// maxEndpointBatch is the batch size of protoactor's endpoint writer that
// frames small enough never reduce.
const maxEndpointBatch = 1000

// ErrTooLarge is the cause of the error a remote tool's handler returns
// for a call that was not run because a frame was over the frame limit of
// its sender (the client's ClientOptions.MaxFrameBytes for the call's
// arguments, the node's NodeOptions.MaxFrameBytes for the call or its
// result).
var ErrTooLarge = errors.New("frame too large")

// KindTooLarge is the failure kind of the answer to a call whose frame
// (the call with its arguments, or its result) was larger than its
// sender's frame limit: the client answers an oversized call with it at
// once without sending it; a node answers so a call whose arguments are
// over its own limit (it does not run it), and replaces a result over its
// limit by such an answer (the call ran). It does not count against the
// tool. It is tools.FailureTooLarge, the kind every transport's size
// limit answers with.
const KindTooLarge = tools.FailureTooLarge

// frameLimit returns the frame limit that the MaxFrameBytes option n
// (0: the default) says, or an error naming the option (field).
func frameLimit(n int, field string) (int, error) {
	switch {
	case n == 0:
		return DefaultMaxFrameBytes, nil
	case n > 0 && n < MinFrameBytes:
		return 0, fmt.Errorf("remote: %s %d: below the minimum of %d (MinFrameBytes), which leaves room for the protocol's own answers; want %d to %d (0: %d)",
			field, n, MinFrameBytes, MinFrameBytes, MaxFrameBytesLimit, DefaultMaxFrameBytes)
	case n < 0 || n > MaxFrameBytesLimit:
		return 0, fmt.Errorf("remote: %s %d: want %d to %d (0: %d)", field, n, MinFrameBytes, MaxFrameBytesLimit, DefaultMaxFrameBytes)
	}
	return n, nil
}

// batchSize is the batch size of an endpoint writer whose frames are at
// most maxFrame bytes: a full batch fits in maxMessageBytes.
func batchSize(maxFrame int) int {
	return max(1, min(maxEndpointBatch, (maxMessageBytes-batchOverhead)/(maxFrame+envelopeOverhead)))
}

// MessageLimits returns the option that bounds the gRPC messages of a
// protoactor remote started elsewhere (a cluster member's) as those of
// this package's nodes and clients are bounded (see Sizes in the
// package's doc): it takes and sends gRPC messages of up to 64 MiB, lets
// one connection have at most 8 streams open at once, and
// its endpoint writers batch no more messages than fit there when each is
// a frame of maxFrame bytes, the remote's frame limit (0:
// DefaultMaxFrameBytes; MinFrameBytes to MaxFrameBytesLimit, or it
// returns an error).
// The remote's code must keep the frames it sends within that limit: a
// batch of larger ones may pass the gRPC limit, which ends the
// connection. The option appends to the remote's server and dial
// options: pass it to remote.Configure after remote.WithServerOptions and
// remote.WithDialOptions, which replace them.
func MessageLimits(maxFrame int) (paremote.ConfigOption, error) {
	limit, err := frameLimit(maxFrame, "MessageLimits frame limit")
	if err != nil {
		return nil, err
	}
	return withMessageLimits(limit), nil
}

// withMessageLimits bounds the gRPC messages of a protoactor remote as
// described above, for frames of up to maxFrame bytes. It appends to the
// server and dial options: put it after WithServerOptions and
// WithDialOptions, which replace them.
func withMessageLimits(maxFrame int) paremote.ConfigOption {
	return func(c *paremote.Config) {
		c.EndpointWriterBatchSize = batchSize(maxFrame)
		c.ServerOptions = append(c.ServerOptions, grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes),
			grpc.MaxConcurrentStreams(maxConcurrentStreams))
		c.DialOptions = append(c.DialOptions, grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)))
	}
}

// oversized returns the size of f when it is over limit, else 0.
func oversized(f *messages.Frame, limit int) int {
	if n := proto.Size(f); n > limit {
		return n
	}
	return 0
}

// tooLarge is the answer (of kind KindTooLarge) to the call key of tool,
// saying msg.
func tooLarge(key callKey, tool, msg string) *messages.Frame {
	f := messages.ToolError(key.stream, key.id, tool, msg)
	f.Meta.FailureKind = string(KindTooLarge)
	return f
}

// maxConcurrentStreams is the most streams a node or client lets one
// connection have open at once: protoactor opens one per connection (its
// endpoint writer's), so this leaves room.
const maxConcurrentStreams = 8
