package anthropic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
	"github.com/polyweave/polyweave-go/models/streaming"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com/"

// DefaultMaxTokens is the max_tokens of requests that set none (the
// Messages API requires one).
const DefaultMaxTokens = 4096

// NoRetries, as Options.MaxRetries, turns the SDK's retries off.
const NoRetries = httpadapter.NoRetries

// MetaThinking is the META frame carrying the thinking blocks of an
// answer (a JSON array of thinking and redacted_thinking blocks with their
// signatures): models.MetaThinkingBlocks. A follow-up must send them back
// as the "thinking_blocks" field of the assistant message
// (models.Message.ThinkingBlocks), which the adapter turns into the blocks
// the API requires before the tool_use blocks.
const MetaThinking = models.MetaThinkingBlocks

// Options configure a [Model]. A nil *Options or a zero field means the
// default.
type Options struct {
	// BaseURL is the API root (the adapter posts to v1/messages under
	// it); default DefaultBaseURL. A root whose path ends in /v1 is read
	// as the root above it: https://api.anthropic.com/v1 posts to
	// https://api.anthropic.com/v1/messages.
	// The password of its user info (https://user:password@host/, sent
	// as basic auth) is never repeated by an ERROR frame, as APIKey, nor
	// is its user name, which may be a token (https://TOKEN@host/) when
	// it has 8 bytes or more (a shorter one where quoted as a credential).
	BaseURL string
	// APIKey is sent with every request (as the SDK sends keys). The adapter never reads the
	// environment for it: see [APIKeyFromEnv].
	// No frame repeats it (an ERROR, a resilience.Transport's retry
	// event): a key of 8 bytes or more is cut out of the text of errors
	// (where some servers quote it) wherever it is, a shorter one where
	// it stands as a word, and one of fewer than 4 bytes, which would cut
	// ordinary words ("a", "key"), only where it is quoted as a
	// credential ("x" in quotes, "Bearer x").
	APIKey string
	// Model is used for requests without a "model" PARAM.
	Model string
	// MaxTokens is used for requests without a "max_tokens" PARAM;
	// default DefaultMaxTokens.
	MaxTokens int
	// Timeout bounds a whole request, retries and streaming included;
	// default 10 minutes.
	Timeout time.Duration
	// IdleTimeout bounds the wait for the response and then for each next
	// bytes of the stream (ping events count); default 3 minutes.
	// The waits of a resilience.Transport (in line for a slot, between
	// retries), and the SDK's own waits before a retry (see MaxRetries),
	// do not count: nothing is on the wire then.
	IdleTimeout time.Duration
	// MaxRetries is how many times the SDK retries a request that failed
	// before streaming began (connection errors, 408, 409, 429 and 5xx,
	// honouring Retry-After); 0 means the SDK's default (2), NoRetries
	// none. A stream cut off midway is never retried.
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
	// RequestOptions are more SDK options applied to every request
	// (headers such as anthropic-beta, middleware), after the ones above.
	// The credentials they add (a key or token header, a key in the
	// query) are kept out of ERROR frames as APIKey is, and the query
	// string out of the URLs errors name.
	RequestOptions []option.RequestOption
	// Logger receives debug logs of requests; default: the runtime's
	// logger (actors.RuntimeOptions.Logger), with the adapter's actor id.
	Logger *slog.Logger
}

// Model is the Anthropic Messages API: the adapters made by [Model.Spec]
// stream their requests to it. Its methods are safe for concurrent use;
// one Model serves any number of adapters. Create it with [New]; the zero
// Model is not usable.
type Model struct {
	client    sdk.Client
	endpoint  *httpadapter.Endpoint
	model     string
	maxTokens int
}

// New checks opts and makes a Model. Nothing is read from the
// environment (no ANTHROPIC_* defaults): opts say everything.
func New(opts *Options) (*Model, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if u, err := url.Parse(o.BaseURL); err == nil {
		if root, ok := strings.CutSuffix(strings.TrimSuffix(u.EscapedPath(), "/"), "/v1"); ok {
			u.RawPath = root + "/"                  // the adapter adds v1/messages itself
			u.Path, _ = url.PathUnescape(u.RawPath) // unescaping what was escaped cannot fail
			o.BaseURL = u.String()
		}
	}
	c := httpadapter.Config{Timeout: o.Timeout, IdleTimeout: o.IdleTimeout, MaxRetries: o.MaxRetries, HTTPClient: o.HTTPClient, Logger: o.Logger, APIKey: o.APIKey, BaseURL: o.BaseURL}
	if !c.Valid() || o.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: negative timeout, retries or max tokens in options")
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	m := &Model{endpoint: httpadapter.Open(c), model: o.Model, maxTokens: o.MaxTokens}
	reqOpts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(o.BaseURL),
		option.WithHTTPClient(m.endpoint.HTTPClient()),
		option.WithHeader("Accept", "text/event-stream"),
		option.WithMiddleware(httpadapter.BetweenRetries),
	}
	if o.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(o.APIKey))
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
var ErrNoAPIKey = errors.New("anthropic: no API key")

// APIKeyFromEnv returns the value of the environment variable name
// (ANTHROPIC_API_KEY when name is empty), or an error wrapping
// ErrNoAPIKey.
func APIKeyFromEnv(name string) (string, error) {
	return httpadapter.KeyFromEnv(name, "ANTHROPIC_API_KEY", ErrNoAPIKey)
}

// Spec returns the spec of an adapter duplex streaming requests to m.
func (m *Model) Spec(name string) actors.Spec {
	return streaming.Spec(name, m.endpoint.Answer(m.body, m.stream))
}

// body writes the Messages API body of req.
func (m *Model) body(req *models.Request) ([]byte, error) {
	return requestBody(req, m.model, m.maxTokens)
}

// stream posts one request and reads its answer. Text deltas go out
// through emit as TEXT frames as they arrive.
func (m *Model) stream(ctx context.Context, streamID string, body []byte, emit func(*messages.Frame)) ([]*messages.Frame, error) {
	bounds, ctx := m.endpoint.Bound(ctx)
	defer bounds.Release()
	fail := bounds.Fail

	var res *http.Response
	if err := m.client.Post(ctx, "v1/messages", body, &res); err != nil {
		return nil, fail("request", describe(ctx, err))
	}
	if err := httpadapter.CheckEventStream(res, ErrNotEventStream); err != nil {
		return nil, fail("request", err)
	}
	res.Body = bounds.Body(res.Body) // ping events, which the SDK skips, show the server is there
	events := ssestream.NewStream[sdk.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	defer events.Close()
	var acc Accumulator
	for events.Next() {
		ev := events.Current()
		text, err := acc.Add(&ev)
		if text != "" {
			emit(messages.Text(streamID, text))
		}
		if err != nil {
			return nil, err
		}
	}
	if err := events.Err(); err != nil {
		return nil, fail("read stream", describe(ctx, err))
	}
	if ctx.Err() != nil {
		return nil, fail("read stream", ctx.Err())
	}
	result, err := acc.Result()
	if err != nil {
		return nil, err
	}
	m.endpoint.Logger(ctx).Debug("answer streamed", slog.String("stream", streamID), slog.String("stop_reason", result.StopReason), slog.Int("tool_calls", len(result.ToolCalls)), slog.Int("truncated_calls", len(result.Truncated)))
	end := httpadapter.Ending{ToolCalls: result.ToolCalls, Truncated: result.Truncated, Thinking: result.Thinking, Usage: result.Usage, Finish: result.Finish}
	return end.Frames(streamID), nil
}

// APIError is an error the API answered with: an HTTP error status, or
// an error event in the stream (Status 200 then). It keeps what a caller
// needs of the SDK's *anthropic.Error and does not unwrap to it: that
// error's text names the request's URL with its user info and quotes the
// whole body, and it holds the request, API key included. The text of
// an HTTP error status also names the request (method and URL, without
// user info or query), and quotes the start of the body when it is not
// the API's error (a proxy's page); of a long Type or Message, it keeps
// the start. Its Type, Message and text have the request's credentials
// cut out, as the text of the error the adapter answers with (which
// wraps it) has.
type APIError struct {
	Status int
	// Type is the error's type ("overloaded_error", "rate_limit_error",
	// "invalid_request_error", ...); Message what the server said. Both
	// are empty for a body that is not the API's error.
	Type    string
	Message string
	// RequestID is the request-id the server answered with, if any: the
	// request's name when asking the provider about it.
	RequestID string
	text      string // of an HTTP error status
}

func (e *APIError) Error() string {
	if e.Status != http.StatusOK || (e.Type == "" && e.Message == "") {
		return e.text
	}
	return fmt.Sprintf("error event in the stream: %s: %s", httpadapter.Message(e.Type), httpadapter.Message(e.Message))
}

// describe turns the SDK's API error, whose text is the request's URL
// (with any user info) and the whole raw body, into an *APIError saying
// what the server said (which does not wrap it), with the credentials of
// the request of ctx cut out of its fields and text (marked
// httpadapter.Scrubbed: the only error of the SDK's a caller reaches
// under the answer's error, by errors.As), marked models.Permanent when its status says another attempt would fail too.
func describe(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		redact := func(s string) string { return httpadapter.Redact(ctx, s) }
		e := &APIError{Status: apiErr.StatusCode, Type: redact(string(apiErr.Type())), Message: redact(apiErr.Message), RequestID: redact(apiErr.RequestID)}
		switch {
		case e.Status != http.StatusOK:
			message := e.Message
			if message == "" && e.Type != "" {
				message = "(no message)"
			}
			e.text = redact(httpadapter.StatusText(apiErr.Request, apiErr.Response, e.Status, e.Type, message))
		case e.Type == "" && e.Message == "":
			e.text = redact("error event in the stream: " + httpadapter.Quote([]byte(apiErr.RawJSON())))
		}
		err = httpadapter.Scrubbed(e) // reachable under the answer's error
	}
	if apiErr != nil && models.PermanentStatus(apiErr.StatusCode) {
		err = models.Permanent(err) // another attempt would be refused the same way
	}
	return err
}

// ErrNotEventStream: the server answered a request with a body whose
// Content-Type is not text/event-stream (a proxy's sign-in page, a
// gateway's error page). The error names the type and quotes the start of
// the body. It is a failure of the request, as the adapter's others are:
// the error wraps ErrNotEventStream under "request: ", unless the answer's
// timeout or idle bound ended it first (then the error says which).
var ErrNotEventStream = errors.New("response is not an event stream")
