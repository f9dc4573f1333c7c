package anthropic

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
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
	got := describe(fmt.Errorf("POST: %w", &sdk.Error{StatusCode: http.StatusUnauthorized, Request: req, Response: res, RequestID: "req_0123"}))
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
