// Package resilience makes model calls survive rate limits and flaky
// networks, and keeps many agents from flooding a provider.
//
// A [Transport] is an http.RoundTripper for the HTTP client of a model
// adapter (openai.Options.HTTPClient, anthropic.Options.HTTPClient):
//
//   - it retries a request that failed before any byte of its response
//     was returned — a connection error (reset, refused, EOF) or an HTTP
//     429 or 5xx status — with exponential back-off and full jitter,
//     waiting at least what the server's Retry-After (or retry-after-ms)
//     asks; a response it has returned is never retried, so an answer
//     cut off midway ends with the adapter's ERROR as before;
//   - it admits at most MaxConcurrent requests at a time: a slot is held
//     from the request until its response body is closed, and requests
//     beyond the limit wait in line (or until their context ends). One
//     Transport shared by every adapter of a runtime (one Model, or
//     several Models on one client) bounds them all together;
//   - it reports each wait in line and each retry as an [Event], to
//     Options.OnEvent and to the observer of the request's context
//     ([WithObserver]): the adapters of this module turn those into META
//     [MetaEvent] frames on the stream of the request. The credentials
//     of the request are cut out of their Error, for both
//     ([WithRedaction]): by the adapters of this module as out of an
//     ERROR frame's text.
//   - its waits (in line, between retries) stop the idle bound of the
//     adapter's answer ([WithWaits]): a Retry-After or a queue longer
//     than the adapter's IdleTimeout does not fail the request; its
//     Timeout bounds them.
//
// Turn the SDK's own retries off when using it (openai.NoRetries,
// anthropic.NoRetries), or both retry.
package resilience
