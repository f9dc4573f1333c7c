package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// NoRetries, as Options.MaxRetries, turns the SDK's retries off.
const NoRetries = -1

// Options configure a [Model]. A nil *Options or a zero field means the
// default.
type Options struct {
	// BaseURL is the API root, ending in /v1 for most servers: for
	// example http://localhost:11434/v1 (Ollama), http://localhost:8000/v1
	// (vLLM), http://localhost:8080/v1 (llama.cpp server),
	// http://localhost:1234/v1 (LM Studio). Default: DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	// The adapter never reads the environment for it: see [APIKeyFromEnv].
	APIKey string
	// Model is used for requests without a "model" PARAM.
	Model string
	// Timeout bounds a whole request, retries and streaming included;
	// default 10 minutes.
	Timeout time.Duration
	// IdleTimeout bounds the wait for the response and then for each next
	// event of the stream; default 3 minutes. A stalled stream fails with
	// an ERROR instead of hanging.
	IdleTimeout time.Duration
	// MaxRetries is how many times the SDK retries a request that failed
	// before streaming began (connection errors, 408, 409, 429 and 5xx,
	// honouring Retry-After); 0 means the SDK's default (2), NoRetries
	// none. A stream cut off midway is never retried: its text has been
	// emitted already.
	MaxRetries int
	// HTTPClient sends the requests; default: a client of the Model's own
	// (on a clone of http.DefaultTransport), released by Close.
	HTTPClient *http.Client
	// DisableUsage stops asking for usage (stream_options.include_usage),
	// for servers that reject the field.
	DisableUsage bool
	// RequestOptions are more SDK options applied to every request
	// (headers, organization, middleware), after the ones above.
	RequestOptions []option.RequestOption
	// Logger receives debug logs of requests; default: discard.
	Logger *slog.Logger
}

// Model is an OpenAI-compatible Chat Completions endpoint: the adapters
// made by [Model.Spec] stream their requests to it. Its methods are safe
// for concurrent use; one Model serves any number of adapters. Create it
// with [New]; the zero Model is not usable.
type Model struct {
	client       sdk.Client
	ownClient    *http.Client // the client New made, if it did
	model        string
	timeout      time.Duration
	idle         time.Duration
	includeUsage bool
	logger       *slog.Logger
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
	if o.Timeout < 0 || o.IdleTimeout < 0 || o.MaxRetries < NoRetries {
		return nil, fmt.Errorf("openai: negative timeout or retries in options")
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 3 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Model{model: o.Model, timeout: o.Timeout, idle: o.IdleTimeout, includeUsage: !o.DisableUsage, logger: o.Logger}
	if o.HTTPClient == nil {
		transport := http.DefaultTransport
		if t, ok := transport.(*http.Transport); ok {
			t = t.Clone()
			t.ResponseHeaderTimeout = o.IdleTimeout
			transport = t
		}
		m.ownClient = &http.Client{Transport: transport}
		o.HTTPClient = m.ownClient
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(o.BaseURL),
		option.WithAPIKey(o.APIKey),
		option.WithHTTPClient(o.HTTPClient),
		option.WithHeader("Accept", "text/event-stream"),
	}
	switch {
	case o.MaxRetries == NoRetries:
		reqOpts = append(reqOpts, option.WithMaxRetries(0))
	case o.MaxRetries > 0:
		reqOpts = append(reqOpts, option.WithMaxRetries(o.MaxRetries))
	}
	m.client = sdk.NewClient(append(reqOpts, o.RequestOptions...)...)
	return m, nil
}

// Close releases the idle connections of the HTTP client New made (none
// when Options.HTTPClient was given). Adapters still running keep working.
func (m *Model) Close() {
	if m.ownClient != nil {
		m.ownClient.CloseIdleConnections()
	}
}

// ErrNoAPIKey is returned by [APIKeyFromEnv] when the variable is unset or
// empty.
var ErrNoAPIKey = errors.New("openai: no API key")

// APIKeyFromEnv returns the value of the environment variable name
// (OPENAI_API_KEY when name is empty), or an error wrapping ErrNoAPIKey.
func APIKeyFromEnv(name string) (string, error) {
	if name == "" {
		name = "OPENAI_API_KEY"
	}
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%w: environment variable %s is empty", ErrNoAPIKey, name)
}

// Spec returns the spec of an adapter duplex streaming requests to m.
func (m *Model) Spec(name string) actors.Spec {
	return actors.Spec{Name: name, New: func() actors.Logic { return &logic{model: m} }}
}

// outcome is what a request's background work returns: the frames that
// end the answer (tool calls, usage, finish) or why it failed.
type outcome struct {
	frames []*messages.Frame
	err    error
}

// logic is the adapter of one incarnation. Each request streams in a
// Context.Go function that hands text deltas over as progress and returns
// the rest as an outcome; the Logic emits them while the request is live.
type logic struct {
	model   *Model
	tracker models.Tracker
}

func (l *logic) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Frame:
		if req := l.tracker.Frame(m, c.Emit); req != nil {
			l.start(c, req)
		}
	case actors.AsyncProgress:
		if req, ok := m.Key.(*models.Request); ok && l.tracker.Live(req) {
			c.Emit(m.Value.(*messages.Frame))
		}
	case actors.AsyncDone:
		req, ok := m.Key.(*models.Request)
		if !ok || !l.tracker.Live(req) {
			return // cancelled: its ERROR and END are out already
		}
		out, _ := m.Value.(outcome)
		if m.Err != nil {
			out.err = m.Err
		}
		l.finish(c, req, out)
	}
}

// start sends req, or answers it with ERROR and END when it cannot be sent.
func (l *logic) start(c actors.Context, req *models.Request) {
	body, err := requestBody(req, l.model.model, l.model.includeUsage)
	if err != nil {
		l.finish(c, req, outcome{err: err})
		return
	}
	stream := req.StreamID
	cancel := c.Go(req, func(ctx context.Context, progress func(any)) any {
		return l.model.stream(ctx, stream, body, progress)
	})
	l.tracker.Start(req, cancel)
}

func (l *logic) finish(c actors.Context, req *models.Request, out outcome) {
	if out.err != nil {
		c.Emit(messages.Error(req.StreamID, out.err.Error()))
	} else {
		for _, f := range out.frames {
			c.Emit(f)
		}
	}
	c.Emit(messages.End(req.StreamID))
	if next := l.tracker.Done(req); next != nil {
		l.start(c, next)
	}
}

var doneEvent = []byte("[DONE]")

// stream sends one request and reads its answer. It runs on its own
// goroutine; text deltas go out through progress as TEXT frames.
func (m *Model) stream(ctx context.Context, streamID string, body []byte, progress func(any)) outcome {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, m.timeout, fmt.Errorf("no complete answer within %v", m.timeout))
	defer stop()
	idle := time.AfterFunc(m.idle, func() { cancel(fmt.Errorf("no data from the server for %v", m.idle)) })
	defer idle.Stop()
	fail := func(op string, err error) outcome {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return outcome{err: fmt.Errorf("%s: %w", op, err)}
	}

	var res *http.Response
	if err := m.client.Post(ctx, "chat/completions", body, &res); err != nil {
		// The SDK's error text is the status alone; the server's message
		// is what tells a user (or the model) what went wrong.
		var apiErr *sdk.Error
		if errors.As(err, &apiErr) && apiErr.Message != "" {
			return outcome{err: fmt.Errorf("request: %w: %s", err, apiErr.Message)}
		}
		return fail("request", err)
	}
	dec := ssestream.NewDecoder(res)
	if dec == nil {
		return outcome{err: errors.New("request: empty response")}
	}
	defer dec.Close()
	var acc Accumulator
	for dec.Next() {
		idle.Reset(m.idle)
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
			return outcome{err: fmt.Errorf("decode chunk: %w", err)}
		}
		text, err := acc.Add(&chunk)
		if text != "" {
			progress(messages.Text(streamID, text))
		}
		if err != nil {
			return outcome{err: err}
		}
	}
	if err := dec.Err(); err != nil {
		return fail("read stream", err)
	}
	if ctx.Err() != nil {
		return fail("read stream", ctx.Err())
	}
	result, err := acc.Result()
	if err != nil {
		return outcome{err: err}
	}
	m.logger.Debug("answer streamed", slog.String("stream", streamID), slog.String("finish", result.Finish), slog.Int("tool_calls", len(result.ToolCalls)))
	frames := make([]*messages.Frame, 0, len(result.ToolCalls)+2)
	for _, tc := range result.ToolCalls {
		f := messages.ToolCall(streamID, tc.ID, tc.Name, tc.Arguments)
		f.Meta = &messages.Metadata{Index: uint32(tc.Index)}
		frames = append(frames, f)
	}
	if result.Usage != nil {
		frames = append(frames, models.UsageFrame(streamID, result.Usage))
	}
	return outcome{frames: append(frames, models.FinishFrame(streamID, result.Finish))}
}
