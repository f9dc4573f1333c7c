package mcp

import (
	"context"

	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// go-sdk decodes the schemas of a tools/list answer into maps of
// float64, which loses what a float64 cannot hold exactly (an integer
// bound beyond 2^53): the import would then refuse a value the server
// allows, naming a bound the server never set. So the import reads the
// raw answers of tools/list on their way to the SDK — over stdio from
// the connection's messages (rawConn), over streamable HTTP from the
// bodies of the replies (rawReplies) — and keeps each tool's schemas as
// the server wrote them (rawSchemas). A raw schema is used only when it
// decodes to the SDK's own value of the same tool, so that a stale or
// unreadable one falls back to the SDK's.

// rawSchemas are the schemas of a session's tools as last listed, as
// the server wrote them, by tool name.
type rawSchemas struct {
	mu    sync.Mutex
	tools map[string]rawTool
}

type rawTool struct {
	input, output json.RawMessage
}

// note records the tools of a raw tools/list result.
func (r *rawSchemas) note(result []byte) {
	var res struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(result, &res) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]rawTool{}
	}
	for _, t := range res.Tools {
		var name string
		if json.Unmarshal(t["name"], &name) != nil {
			continue
		}
		r.tools[name] = rawTool{input: t["inputSchema"], output: t["outputSchema"]}
	}
}

// exact gives t the schemas the server wrote, where they are the ones
// the SDK decoded.
func (r *rawSchemas) exact(t *sdk.Tool) {
	r.mu.Lock()
	raw, ok := r.tools[t.Name]
	r.mu.Unlock()
	if !ok {
		return
	}
	if same(raw.input, t.InputSchema) {
		t.InputSchema = raw.input
	}
	if t.OutputSchema != nil && same(raw.output, t.OutputSchema) {
		t.OutputSchema = raw.output
	}
}

// same says raw decodes to decoded, as the SDK decodes it.
func same(raw json.RawMessage, decoded any) bool {
	var v any
	return len(raw) > 0 && json.Unmarshal(raw, &v) == nil && reflect.DeepEqual(v, decoded)
}

// rawTransport hands the raw tools/list results of its connection (a
// stdio one) to schemas.
type rawTransport struct {
	sdk.Transport
	schemas *rawSchemas
}

func (t rawTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: c, schemas: t.schemas, lists: map[jsonrpc.ID]bool{}}, nil
}

// rawConn notes the ids of the tools/list requests it writes and hands
// the results of their responses, as read, to schemas before the SDK
// has them.
type rawConn struct {
	sdk.Connection
	schemas *rawSchemas
	mu      sync.Mutex
	lists   map[jsonrpc.ID]bool // tools/list requests not yet answered
}

func (c *rawConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "tools/list" && r.ID.IsValid() {
		c.mu.Lock()
		c.lists[r.ID] = true
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, m)
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		list := c.lists[r.ID]
		delete(c.lists, r.ID)
		c.mu.Unlock()
		if list && r.Error == nil {
			c.schemas.note(r.Result)
		}
	}
	return m, err
}

// rawReplies hands the raw results of the tools/list requests it sends
// (over streamable HTTP) to schemas, before the SDK reads them: a JSON
// reply whole, an event stream event by event as the SDK reads it.
type rawReplies struct {
	next    http.RoundTripper
	schemas *rawSchemas
}

func (w rawReplies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil || r.GetBody == nil {
		return w.next.RoundTrip(r)
	}
	body, err := r.GetBody()
	if err != nil {
		return w.next.RoundTrip(r)
	}
	var req struct {
		Method string `json:"method"`
	}
	err = json.NewDecoder(body).Decode(&req)
	_ = body.Close()
	if err != nil || req.Method != "tools/list" {
		return w.next.RoundTrip(r)
	}
	res, err := w.next.RoundTrip(r)
	if err != nil || res.StatusCode != http.StatusOK {
		return res, err
	}
	media, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch media {
	case "application/json":
		b, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		w.schemas.noteMessage(b)
		res.Body = io.NopCloser(bytes.NewReader(b))
		if err != nil {
			res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		}
	case "text/event-stream":
		res.Body = &eventTap{ReadCloser: res.Body, schemas: w.schemas}
	}
	return res, nil
}

// noteMessage notes the result of a JSON-RPC response (or of the
// responses of a batch).
func (r *rawSchemas) noteMessage(b []byte) {
	b = bytes.TrimSpace(b)
	msgs := []json.RawMessage{b}
	if len(b) > 0 && b[0] == '[' && json.Unmarshal(b, &msgs) != nil {
		return
	}
	for _, m := range msgs {
		var res struct {
			Method *string         `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(m, &res) == nil && res.Method == nil && len(res.Result) > 0 {
			r.note(res.Result)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// eventTap reads an event stream on behalf of the SDK and notes the
// response in each event's data, before the bytes that end the event
// reach the SDK.
type eventTap struct {
	io.ReadCloser
	schemas *rawSchemas
	line    []byte // the line being read
	data    []byte // the data of the event being read
}

func (e *eventTap) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c != '\n' {
			e.line = append(e.line, c)
			continue
		}
		line := bytes.TrimSuffix(e.line, []byte{'\r'})
		e.line = e.line[:0]
		switch {
		case len(line) == 0:
			if len(e.data) > 0 {
				e.schemas.noteMessage(e.data)
			}
			e.data = e.data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(e.data) > 0 {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	return n, err
}
