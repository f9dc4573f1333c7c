package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// TestAnswer_APIErrorKeepsNoSDKError: the error of an HTTP error status
// does not reach the SDK's *Error (its Request holds the API key in its
// Authorization header, its Message is the server's, key included): a
// caller reaches an *APIError by errors.As, with the status, type, code
// and request id, and the message with the key cut out.
func TestAnswer_APIErrorKeepsNoSDKError(t *testing.T) {
	const key = "sk-proj-quoted-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_0123")
		w.WriteHeader(http.StatusUnauthorized)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "invalid key " + key, "type": "invalid_request_error", "code": "invalid_api_key"}})
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	err := answerErr(t, srv, key)
	if err == nil {
		t.Fatal("no error")
	}
	if sdkErr := (*sdk.Error)(nil); errors.As(err, &sdkErr) {
		t.Errorf("errors.As reaches the SDK's error, its message %q and its request's Authorization %q", sdkErr.Message, sdkErr.Request.Header.Get("Authorization"))
	}
	if !models.IsPermanent(err) {
		t.Errorf("error %q is not permanent", err)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("answer: %v; want an *APIError", err)
	}
	if apiErr.Status != http.StatusUnauthorized || apiErr.Type != "invalid_request_error" || apiErr.Code != "invalid_api_key" || apiErr.RequestID != "req_0123" {
		t.Errorf("APIError %+v; want the status, type, code and request id", *apiErr)
	}
	for what, text := range map[string]string{"error": err.Error(), "APIError": apiErr.Error(), "Message": apiErr.Message} {
		if strings.Contains(text, key) {
			t.Errorf("the %s shows the key: %q", what, text)
		}
	}
	if apiErr.Message != "invalid key [redacted]" || !strings.Contains(err.Error(), "HTTP 401 Unauthorized from POST "+srv.URL+"/v1/chat/completions: invalid key [redacted]") {
		t.Errorf("error %q, Message %q; want the status, the request and what the server said, the key cut out", err, apiErr.Message)
	}
}

// TestAnswer_ServerErrorHasTheKeyCutOut: an error event quoting the key
// is a *ServerError a caller reaches by errors.As, its Message and Raw
// with the key cut out as the answer's text has.
func TestAnswer_ServerErrorHasTheKeyCutOut(t *testing.T) {
	const key = "sk-proj-quoted-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"error":{"message":"bad key ` + key + `","type":"server_error"}}` + "\n\n"))
	}))
	defer srv.Close()
	err := answerErr(t, srv, key)
	var se *ServerError
	if !errors.As(err, &se) {
		t.Fatalf("answer: %v; want a *ServerError", err)
	}
	if se.Message != "bad key [redacted]" || strings.Contains(string(se.Raw), key) || strings.Contains(err.Error(), key) {
		t.Errorf("error %q, ServerError %q %s; want the key cut out", err, se.Message, se.Raw)
	}
}

// TestAnswer_ServerErrorRawIsJSON: the Raw of a *ServerError, its
// credentials cut out, is valid JSON whatever the server quoted, and
// holds the credential in no form a JSON reader gets back: a short key
// that stands as a JSON number (cut out of the text as a word, it would
// leave "code":[redacted]), and a key the server wrote with its '/'
// escaped as "\/" (as PHP's json_encode does), which the text does not
// show as it is but the object decoded does.
func TestAnswer_ServerErrorRawIsJSON(t *testing.T) {
	for _, c := range []struct{ name, key, event string }{
		{"number", "73519", `{"error":{"message":"bad key 73519","code":73519}}`},
		{"escaped", "sk-proj/quoted-0123456789", `{"error":{"message":"bad key sk-proj\/quoted-0123456789","type":"server_error"}}`},
		{"quoted", "sk-proj-quoted-0123456789", `{"error":{"message":"bad key \"sk-proj-quoted-0123456789\" <here>","type":"server_error"}}`},
		{"message alone", "sk-proj-quoted-0123456789", `{"error":"bad key sk-proj-quoted-0123456789"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: " + c.event + "\n\n"))
			}))
			defer srv.Close()
			err := answerErr(t, srv, c.key)
			var se *ServerError
			if !errors.As(err, &se) {
				t.Fatalf("answer: %v; want a *ServerError", err)
			}
			if !json.Valid(se.Raw) {
				t.Fatalf("Raw %s is not valid JSON", se.Raw)
			}
			var decoded any
			if err := json.Unmarshal(se.Raw, &decoded); err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(decoded)
			for what, text := range map[string]string{"Raw": string(se.Raw), "Raw decoded": fmt.Sprint(decoded), "Raw decoded and encoded": string(again), "Message": se.Message, "error": err.Error()} {
				if strings.Contains(text, c.key) {
					t.Errorf("%s shows the key: %s", what, text)
				}
			}
			if !strings.Contains(string(se.Raw), "bad key [redacted]") && !strings.Contains(string(se.Raw), `bad key \"[redacted]\"`) {
				t.Errorf("Raw %s; want the server's message, the key cut out", se.Raw)
			}
		})
	}
}

// answerErr returns the error of an answer of srv with the API key key.
func answerErr(t *testing.T, srv *httptest.Server, key string) error {
	t.Helper()
	m, err := New(&Options{APIKey: key, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client(), Model: "gpt-test", MaxRetries: NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	req := &models.Request{StreamID: "s1", Params: []models.Param{{Name: models.ParamMessages, Value: json.RawMessage(`[{"role":"user","content":"hi"}]`)}}}
	_, err = m.endpoint.Answer(m.body, m.stream)(context.Background(), req, func(*messages.Frame) {})
	return err
}
