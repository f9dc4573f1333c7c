// Package scripted is a deterministic model adapter: it answers requests
// with the turns of a [Script] (a Go value, or a JSON file read with
// [Load]) instead of asking a real model. It is the workhorse of tests and
// benchmarks and the default model of the demo.
//
// A turn says what the model answers: text split into deltas, tool calls
// (atomic, or streaming with their arguments cut into chunks, parallel,
// optionally interleaved), token usage, a finish reason, or an error; and
// how slowly, with delays that are actor timers rather than sleeps. A
// request picks its turn by sequence (the n-th request gets turn n, the
// default) or by conversation (a request whose messages hold n assistant
// messages gets turn n). Every request is recorded for tests to inspect.
//
//	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
//		{Text: "Reading it.", ToolCalls: []scripted.ToolCall{
//			{ID: "call_1", Name: "read_file", Arguments: `{"path":"go.mod"}`},
//		}},
//		{Text: "It is a Go module."},
//	}}, nil)
//	conn, err := runtime.Start(model.Spec("model"))
//
// The adapter follows the contract of package models: PARAM frames and END
// make a request; TEXT, TOOL_CALL, META usage and finish, END (or ERROR and
// END) answer it; CANCEL and ABORT stop it. Frames are built from a
// compiled form of the script, so answering costs no JSON encoding (the
// only decoding is counting assistant messages under ByConversation), and
// the frames of a turn are made in one allocation, their metadata shared,
// however many chunks and deltas it streams.
package scripted
