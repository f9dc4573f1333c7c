package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
)

// TestDescribe_ReachesNoSDKError: the *APIError of an HTTP error status
// keeps what a caller needs of the SDK's error (status, request ID) but
// does not unwrap to it: its text names the request's URL with its user
// info, and it holds the request, API key included. No error a caller
// reaches by unwrapping says the password of the URL.
func TestDescribe_ReachesNoSDKError(t *testing.T) {
	const password = "hunter2-0123456789"
	req, err := http.NewRequest(http.MethodPost, "https://user:"+password+"@api.example.com/v1/messages", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "sk-ant-0123456789")
	res := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("no"))}
	got := describe(context.Background(), fmt.Errorf("POST: %w", &sdk.Error{StatusCode: http.StatusUnauthorized, Request: req, Response: res, RequestID: "req_0123"}))
	var apiErr *APIError
	if !errors.As(got, &apiErr) || apiErr.Status != http.StatusUnauthorized || apiErr.RequestID != "req_0123" {
		t.Fatalf("describe gave %#v; want an *APIError of status 401 and its request ID", got)
	}
	if sdkErr := (*sdk.Error)(nil); errors.As(got, &sdkErr) {
		t.Errorf("the error unwraps to the SDK's error, %q", sdkErr)
	}
	for e := error(apiErr); e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), password) {
			t.Errorf("an error of the chain, %T, says the password: %q", e, e)
		}
	}
	if !strings.Contains(apiErr.Error(), "HTTP 401 Unauthorized from POST https://api.example.com/v1/messages") {
		t.Errorf("error %q; want the status and the request, without its user info", apiErr)
	}
}

// TestAnswer_APIErrorFieldsHaveTheKeyCutOut: a server that quotes the API
// key in its error's message (or type) has it cut out of the error the
// adapter answers with, and of the *APIError a caller reaches in it by
// errors.As: its Message, Type, RequestID (a request-id header the
// server wrote as it liked) and text.
func TestAnswer_APIErrorFieldsHaveTheKeyCutOut(t *testing.T) {
	const key = "sk-ant-api03-quoted-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", "req_"+key)
		anthropictest.WriteError(w, http.StatusUnauthorized, "bad_key_"+key, "invalid key "+key)
	}))
	defer srv.Close()
	m, err := New(&Options{APIKey: key, BaseURL: srv.URL, HTTPClient: srv.Client(), Model: "claude-test", MaxRetries: NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	req := &models.Request{StreamID: "s1", Params: []models.Param{{Name: models.ParamMessages, Value: json.RawMessage(`[{"role":"user","content":"hi"}]`)}}}
	_, err = m.endpoint.Answer(m.body, m.stream)(context.Background(), req, func(*messages.Frame) {})
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("answer: %v; want an *APIError", err)
	}
	for what, text := range map[string]string{"error": err.Error(), "APIError": apiErr.Error(), "Message": apiErr.Message, "Type": apiErr.Type, "RequestID": apiErr.RequestID} {
		if strings.Contains(text, key) {
			t.Errorf("the %s shows the key: %q", what, text)
		}
	}
	if !strings.HasPrefix(apiErr.Message, "invalid key ") {
		t.Errorf("Message %q; want what the server said, the key cut out", apiErr.Message)
	}
	if !strings.HasPrefix(apiErr.RequestID, "req_") {
		t.Errorf("RequestID %q; want the server's, the key cut out", apiErr.RequestID)
	}
}
