package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// A server that answers 404 to a -base-url without /v1 is most often
// one whose API root was given without its /v1: the error says so. Where
// -base-url ends in /v1 a 404 means something else (Ollama's unknown
// model), and the hint would mislead.
func TestRun_BaseURLNotFoundHintsAtV1(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"not found"}}`))
	}))
	defer srv.Close()
	const hint = "-base-url is the API root, which usually ends in /v1"
	for _, tc := range []struct {
		baseURL  string
		wantHint bool
	}{
		{srv.URL, true},
		{srv.URL + "/", true},
		{srv.URL + "/v1", false},
		{srv.URL + "/v1/", false},
	} {
		t.Run(tc.baseURL, func(t *testing.T) {
			out, errOut, err := runInProcess(t, "-base-url", tc.baseURL, "-workspace", t.TempDir())
			if err == nil || exitCode(err, &strings.Builder{}) != 1 {
				t.Fatalf("run: %v, want a failure (exit 1)\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			if !strings.Contains(err.Error(), "404") {
				t.Errorf("the error does not name the status: %v", err)
			}
			if got := strings.Contains(err.Error(), hint); got != tc.wantHint {
				t.Errorf("hint in %q: %v, want %v", err, got, tc.wantHint)
			}
		})
	}
}
