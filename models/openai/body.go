package openai

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
)

// ErrNoModel is the error of a request with no "model" PARAM sent to an
// adapter with no default model.
var ErrNoModel = errors.New("no model: send a model PARAM or set Options.Model")

// ErrNoMessages is the error of a request without a "messages" PARAM.
var ErrNoMessages = errors.New("request has no messages PARAM")

// fields the adapter sets itself; PARAMs with these names are dropped.
var reserved = map[string]bool{"stream": true, "stream_options": true}

// fields the API rejects in a request without tools; they are dropped
// then.
var toolFields = map[string]bool{models.ParamTools: true, models.ParamToolChoice: true, "parallel_tool_calls": true}

// requestBody writes the Chat Completions request for req: every PARAM as
// a top-level field, its value copied byte for byte (the last value of a
// name wins), the default model when the request names none, and the
// streaming fields. An empty or null "tools" is left out, and so are
// "tool_choice" and "parallel_tool_calls" then: the API rejects them
// without tools.
func requestBody(req *models.Request, defaultModel string, includeUsage bool) ([]byte, error) {
	if _, ok := req.Param(models.ParamMessages); !ok {
		return nil, ErrNoMessages
	}
	last := make(map[string]int, len(req.Params))
	for i, p := range req.Params {
		last[p.Name] = i
	}
	hasTools := false
	if tools, ok := req.Param(models.ParamTools); ok {
		t := bytes.TrimSpace(tools)
		hasTools = !bytes.Equal(t, []byte("null")) && !isEmptyArray(t)
	}
	size := 64
	for _, p := range req.Params {
		size += len(p.Name) + len(p.Value) + 4
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	if _, ok := req.Param(models.ParamModel); !ok {
		if defaultModel == "" {
			return nil, ErrNoModel
		}
		buf = appendField(buf, models.ParamModel, nil)
		buf = appendString(buf, defaultModel)
	}
	for i, p := range req.Params {
		if last[p.Name] != i || reserved[p.Name] {
			continue
		}
		if !hasTools && toolFields[p.Name] {
			continue
		}
		if err := httpadapter.CheckParam(p); err != nil {
			return nil, err
		}
		buf = appendField(buf, p.Name, p.Value)
	}
	buf = appendField(buf, "stream", []byte("true"))
	if includeUsage {
		buf = appendField(buf, "stream_options", []byte(`{"include_usage":true}`))
	}
	return append(buf, '}'), nil
}

// appendField appends `"name":value` with a separating comma when needed.
func appendField(buf []byte, name string, value []byte) []byte {
	if len(buf) > 1 {
		buf = append(buf, ',')
	}
	buf = appendString(buf, name)
	buf = append(buf, ':')
	return append(buf, value...)
}

func appendString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(buf, b...)
}

func isEmptyArray(b []byte) bool {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}
