package httpadapter_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
)

// TestAnswer_CutsTheUserInfoOutOfEveryURL: the user info of a URL an
// error names is cut out whatever it holds: a user name too short to be
// cut out wherever it stands ("me"), one escaped in the URL
// (tok%2Fen..., which url.URL.Username gives unescaped), one with an
// '@' or ':' of its own, and a password as http.Client writes it (***)
// or as the SDKs' errors quote the request's URL (whole, escaped). The
// host and path stay, so that the error still says where the request
// went.
func TestAnswer_CutsTheUserInfoOutOfEveryURL(t *testing.T) {
	for _, user := range []string{
		"me",
		"me:pw",
		"tok%2Fen-0123456789",
		"me%40example.com:pa%2Fss-0123456789",
		"tok:p@ss-0123456789",
		"%74ok-0123456789", // "tok-0123456789" escaped where it need not be
	} {
		for _, inConfig := range []bool{false, true} {
			t.Run(fmt.Sprint(user, "/in config=", inConfig), func(t *testing.T) {
				before := goleak.IgnoreCurrent()
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
						_ = conn.Close() // http.Client's error names the URL
					}
				}))
				client := srv.Client()
				defer func() {
					client.CloseIdleConnections()
					srv.Close()
					leakcheck.VerifyNone(t, before)
				}()
				base := strings.Replace(srv.URL, "://", "://"+user+"@", 1) + "/v1"
				u, err := url.Parse(base)
				if err != nil {
					t.Fatal(err)
				}
				cfg := httpadapter.Config{HTTPClient: client}
				if inConfig {
					cfg.BaseURL = base
				}
				e := httpadapter.Open(cfg)
				answer := e.Answer(func(*models.Request) ([]byte, error) { return nil, nil },
					func(ctx context.Context, _ string, _ []byte, _ func(*messages.Frame)) ([]*messages.Frame, error) {
						req, err := http.NewRequestWithContext(ctx, http.MethodPost, base, nil)
						if err != nil {
							return nil, err
						}
						_, err = httpadapter.Credentials(req, client.Do)
						return nil, fmt.Errorf("POST %q: %w", req.URL, err) // as the SDKs quote it
					})
				_, err = answer(context.Background(), &models.Request{StreamID: "s1"}, func(*messages.Frame) {})
				if err == nil {
					t.Fatal("no error")
				}
				password, _ := u.User.Password()
				shown := []string{"//" + user + "@", "//" + u.User.String() + "@", "//" + u.User.Username() + "@", "//" + u.User.Username() + ":"}
				if password != "" {
					shown = append(shown, password, url.User(password).String())
				}
				for _, s := range shown {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error %q shows %q of the URL's user info", err, s)
					}
				}
				if host := strings.TrimPrefix(srv.URL, "http://"); strings.Count(err.Error(), "@"+host+"/v1") != 2 {
					t.Errorf("error %q; want the host and path of the URL in both its quotes, past its user info cut out", err)
				}
			})
		}
	}
}
