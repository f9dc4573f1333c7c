package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
	"github.com/polyweave/polyweave-go/models/streaming"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// NoRetries, as Options.MaxRetries, turns the SDK's retries off.
const NoRetries = httpadapter.NoRetries

// Options configure a [Model]. A nil *Options or a zero field means the
// default.
type Options struct {
	// BaseURL is the API root, ending in /v1 for most servers: for
	// example http://localhost:11434/v1 (Ollama), http://localhost:8000/v1
	// (vLLM), http://localhost:8080/v1 (llama.cpp server),
	// http://localhost:1234/v1 (LM Studio). Default: DefaultBaseURL.
	// The password of its user info (https://user:password@host/, sent
	// as basic auth) is never repeated by an ERROR frame, as APIKey, nor
	// is its user name, which may be a token (https://TOKEN@host/) when
	// it has 8 bytes or more (a shorter one where quoted as a credential).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	// The adapter never reads the environment for it: see [APIKeyFromEnv].
	// No frame repeats it (an ERROR, a resilience.Transport's retry
	// event): a key of 8 bytes or more is cut out of the text of errors
	// (where some servers quote it) wherever it is, a shorter one where
	// it stands as a word, and one of fewer than 4 bytes, which would cut
	// ordinary words ("a", "key"), only where it is quoted as a
	// credential ("x" in quotes, "Bearer x").
	APIKey string
	// Model is used for requests without a "model" PARAM.
	Model string
	// Timeout bounds a whole request, retries and streaming included;
	// default 10 minutes.
	Timeout time.Duration
	// IdleTimeout bounds the wait for the response and then for each next
	// bytes of the stream (keep-alive comments count); default 3 minutes.
	// A stalled stream fails with an ERROR instead of hanging.
	// The waits of a resilience.Transport (in line for a slot, between
	// retries), and the SDK's own waits before a retry (see MaxRetries),
	// do not count: nothing is on the wire then.
	IdleTimeout time.Duration
	// MaxRetries is how many times the SDK retries a request that failed
	// before streaming began (connection errors, 408, 409, 429 and 5xx,
	// honouring Retry-After); 0 means the SDK's default (2), NoRetries
	// none. A stream cut off midway is never retried: its text has been
	// emitted already.
	MaxRetries int
	// HTTPClient sends the requests; default: a client of the Model's own
	// (on a clone of http.DefaultTransport), released by Close. The
	// credentials its transport adds (an OAuth2 transport's token) are
	// kept out of frames as APIKey is, when an *http.Transport at the
	// bottom sends them with the request's context. A request redirected
	// to another origin (scheme, host or port) is not followed, whatever
	// the status: its body, the prompt, is for the API's server alone; the
	// answer fails, permanently and without a retry, saying the method
	// and the status (not the place the redirect points to). Nor is one
	// redirected on the API's origin with 301, 302 or 303, which the client
	// would send on as a GET without the prompt, and whose answer is none
	// to it: the answer fails so too, saying the status and the place (the
	// values of its query cut); 307 and 308 keep the method and the body,
	// and are followed. A client given with a
	// CheckRedirect of its own has it decide instead, and a redirect it
	// lets through goes to the other origin without the headers that may
	// carry credentials (Authorization, X-Api-Key, Api-Key, any whose name
	// speaks of a key, token, secret or auth).
	HTTPClient *http.Client
	// DisableUsage stops asking for usage (stream_options.include_usage),
	// for servers that reject the field.
	DisableUsage bool
	// RequestOptions are more SDK options applied to every request
	// (headers, organization, middleware), after the ones above.
	// The credentials they add (an Api-Key or other key header, a key in
	// the query) are kept out of ERROR frames as APIKey is, and the query
	// string out of the URLs errors name.
	RequestOptions []option.RequestOption
	// Logger receives debug logs of requests; default: the runtime's
	// logger (actors.RuntimeOptions.Logger), with the adapter's actor id.
	Logger *slog.Logger
}

// Model is an OpenAI-compatible Chat Completions endpoint: the adapters
// made by [Model.Spec] stream their requests to it. Its methods are safe
// for concurrent use; one Model serves any number of adapters. Create it
// with [New]; the zero Model is not usable.
type Model struct {
	client       sdk.Client
	endpoint     *httpadapter.Endpoint
	model        string
	includeUsage bool
}

// New checks opts and makes a Model. The SDK reads OPENAI_* variables of
// the environment as its defaults; the base URL and API key of opts
// always override them.
func New(opts *Options) (*Model, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	c := httpadapter.Config{Timeout: o.Timeout, IdleTimeout: o.IdleTimeout, MaxRetries: o.MaxRetries, HTTPClient: o.HTTPClient, Logger: o.Logger, APIKey: o.APIKey, BaseURL: o.BaseURL}
	if !c.Valid() {
		return nil, fmt.Errorf("openai: negative timeout or retries in options")
	}
	m := &Model{endpoint: httpadapter.Open(c), model: o.Model, includeUsage: !o.DisableUsage}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(o.BaseURL),
		option.WithAPIKey(o.APIKey),
		option.WithHTTPClient(m.endpoint.HTTPClient()),
		option.WithHeader("Accept", "text/event-stream"),
		option.WithMiddleware(httpadapter.BetweenRetries),
	}
	if n, ok := c.Retries(); ok {
		reqOpts = append(reqOpts, option.WithMaxRetries(n))
	}
	// Credentials last, so that it notes those the RequestOptions add.
	reqOpts = append(append(reqOpts, o.RequestOptions...), option.WithMiddleware(httpadapter.Credentials))
	m.client = sdk.NewClient(reqOpts...)
	return m, nil
}

// Close releases the idle connections of the HTTP client New made (none
// when Options.HTTPClient was given). Adapters still running keep working.
func (m *Model) Close() { m.endpoint.Close() }

// ErrNoAPIKey is returned by [APIKeyFromEnv] when the variable is unset or
// empty.
var ErrNoAPIKey = errors.New("openai: no API key")

// APIKeyFromEnv returns the value of the environment variable name
// (OPENAI_API_KEY when name is empty), or an error wrapping ErrNoAPIKey.
func APIKeyFromEnv(name string) (string, error) {
	return httpadapter.KeyFromEnv(name, "OPENAI_API_KEY", ErrNoAPIKey)
}

// Spec returns the spec of an adapter duplex streaming requests to m.
func (m *Model) Spec(name string) actors.Spec {
	return streaming.Spec(name, m.endpoint.Answer(m.body, m.stream))
}

// body writes the Chat Completions body of req.
func (m *Model) body(req *models.Request) ([]byte, error) {
	return requestBody(req, m.model, m.includeUsage)
}

var doneEvent = []byte("[DONE]")

// stream sends one request and reads its answer. It runs on its own
// goroutine; text deltas go out through emit as TEXT frames.
func (m *Model) stream(ctx context.Context, streamID string, body []byte, emit func(*messages.Frame)) ([]*messages.Frame, error) {
	bounds, ctx := m.endpoint.Bound(ctx)
	defer bounds.Release()
	fail := bounds.Fail

	var res *http.Response
	if err := m.client.Post(ctx, "chat/completions", body, &res); err != nil {
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) {
			return nil, fail("request", err)
		}
		err = fmt.Errorf("request: %w", describe(ctx, apiErr))
		if models.PermanentStatus(apiErr.StatusCode) {
			err = models.Permanent(err) // another attempt would be refused the same way
		}
		return nil, err
	}
	if err := httpadapter.CheckEventStream(res, ErrNotEventStream); err != nil {
		return nil, fail("request", err)
	}
	res.Body = bounds.Body(res.Body) // keep-alive comments show the server is there
	dec := ssestream.NewDecoder(res)
	if dec == nil {
		return nil, errors.New("request: empty response")
	}
	defer dec.Close()
	var acc Accumulator
	for dec.Next() {
		data := bytes.TrimSpace(dec.Event().Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, doneEvent) {
			acc.Done()
			break
		}
		var chunk sdk.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return nil, fmt.Errorf("decode chunk %s: %w", httpadapter.Quote(data), err)
		}
		text, err := acc.Add(&chunk)
		if text != "" {
			emit(messages.Text(streamID, text))
		}
		if se := (*ServerError)(nil); errors.As(err, &se) {
			// The server's words, which may quote the key: a copy with
			// the credentials cut out is what a caller reaches.
			redact := func(s string) string { return httpadapter.Redact(ctx, s) }
			return nil, httpadapter.Scrubbed(&ServerError{Raw: httpadapter.RedactJSON(ctx, se.Raw), Message: redact(se.Message)})
		}
		if err != nil {
			return nil, err
		}
	}
	if err := dec.Err(); err != nil {
		return nil, fail("read stream", err)
	}
	if ctx.Err() != nil {
		return nil, fail("read stream", ctx.Err())
	}
	result, err := acc.Result()
	if err != nil {
		return nil, err
	}
	m.endpoint.Logger(ctx).Debug("answer streamed", slog.String("stream", streamID), slog.String("finish", result.Finish), slog.Int("tool_calls", len(result.ToolCalls)))
	end := httpadapter.Ending{ToolCalls: result.ToolCalls, Truncated: result.Truncated, Usage: result.Usage, Finish: result.Finish}
	return end.Frames(streamID), nil
}

// APIError is the error of an HTTP error status the API answered with.
// It keeps what a caller needs of the SDK's *openai.Error and does not
// unwrap to it: that error holds the request, API key included, and the
// server's message as it was sent. Its text names the status, the
// request (method and URL, without user info or query) and what the
// server said (its message, or the quoted start of the body when it is
// not the API's error: a proxy's page); of a long message, it keeps the
// start. Its fields and text have the request's credentials cut out, as
// the text of the error the adapter answers with (which wraps it) has.
type APIError struct {
	Status int
	// Type and Code are the error's type ("invalid_request_error") and
	// code ("invalid_api_key"), Message its message; they are empty for
	// a body that is not the API's error.
	Type    string
	Code    string
	Message string
	// RequestID is the x-request-id the server answered with, if any:
	// the request's name when asking the provider about it.
	RequestID string
	text      string
}

func (e *APIError) Error() string { return e.text }

// describe turns the SDK's API error, whose text is the status alone,
// into an *APIError saying what the server said (the URL asked for and
// the server's message or the start of its body are what tell a user,
// or the model, what went wrong), with the credentials of the request of
// ctx cut out of its fields and text. It is marked httpadapter.Scrubbed:
// the only error of the SDK's a caller reaches under the answer's error.
func describe(ctx context.Context, apiErr *sdk.Error) error {
	redact := func(s string) string { return httpadapter.Redact(ctx, s) }
	e := &APIError{Status: apiErr.StatusCode, Type: redact(apiErr.Type), Code: redact(apiErr.Code), Message: redact(apiErr.Message)}
	if apiErr.Response != nil {
		e.RequestID = redact(apiErr.Response.Header.Get("X-Request-Id"))
	}
	e.text = redact(httpadapter.StatusText(apiErr.Request, apiErr.Response, e.Status, "", apiErr.Message))
	return httpadapter.Scrubbed(e)
}

// ErrNotEventStream: the server answered a request with a body whose
// Content-Type is not text/event-stream (a proxy's sign-in page, a
// gateway's error page, a server that ignored "stream": true). The error
// names the type and quotes the start of the body. It is a failure of the
// request, as the adapter's others are: the error wraps ErrNotEventStream
// under "request: ", unless the answer's timeout or idle bound ended it
// first (then the error says which).
var ErrNotEventStream = errors.New("response is not an event stream")
