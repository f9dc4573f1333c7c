// Package streaming is the actor shell of model adapters that answer each
// request with background work: an HTTP call whose answer streams in.
//
// [Spec] makes an adapter duplex from an [AnswerFunc]. The shell keeps the
// streams apart with a models.Tracker, runs the function of each request
// started on its own goroutine (actors.Context.Go), emits the frames the
// function hands over while it runs (text deltas, META events) as long as
// the request is live, and then the frames that end the answer, or
// ERROR (the error's text, bytes that are not UTF-8 replaced) and END
// when the function failed. CANCEL and ABORT cancel the
// function's context; nothing it hands over later is emitted.
//
// The adapters of models/openai and models/anthropic are built on it; it
// has no dependency on any provider's SDK.
package streaming
