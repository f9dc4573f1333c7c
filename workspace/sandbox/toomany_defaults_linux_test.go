package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// What ResolveHide reserves for DefaultHidden, as it bounds what links
// in the workspace lead patterns to, counts what each of its patterns
// matches (the host's keys of /etc/ssh/ssh_host_*_key, say), not one
// for each: counted as one, a pattern matching a hundred let the
// workspace open, and every set-up then failed with ErrTooManyHidden.
func TestTooManyHiddenCountsDefaultPatternsMatches(t *testing.T) {
	ws, base := t.TempDir(), dirOutsideTmp(t)
	keys := filepath.Join(base, "keys")
	if err := os.Mkdir(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	const hostKeys = 100
	for i := range hostKeys {
		if err := os.WriteFile(filepath.Join(keys, "k"+strconv.Itoa(i)+"_key"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	saved := DefaultHidden
	t.Cleanup(func() { DefaultHidden = saved })
	DefaultHidden = append(append([]string(nil), saved...), filepath.Join(keys, "*_key"))
	// Matches through a link in the workspace, a few short of what the
	// reserve left when it counted the pattern as one.
	want := MaxHidden - (len(DefaultHidden) + 1) - 10
	scattered := filepath.Join(base, "scattered")
	for i := 0; i*crowd < want; i++ {
		d := filepath.Join(scattered, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		makeMatches(t, d, 0, min(crowd, want-i*crowd))
	}
	link := filepath.Join(ws, "a")
	if err := os.Symlink(scattered, link); err != nil {
		t.Fatal(err)
	}
	cfg := defaults(t, Config{Hide: []string{filepath.Join(link, "*", "*.pem")}})
	var err error
	cfg.Resolved, err = ResolveHide(cfg.Hide, ws)
	if err == nil {
		root, null := openRootAndNull(t, ws)
		p, err := Start(cfg, root, "/bin/sh", "true", nil, null, null)
		if err == nil {
			_, _ = p.Finish()
			_ = p.Cmd.Wait()
		}
		t.Fatalf("ResolveHide kept %d paths; a set-up then: %v", len(cfg.Resolved), err)
	}
	if !errors.Is(err, ErrTooManyHidden) || !errors.Is(err, ErrConfig) {
		t.Fatalf("ResolveHide: %v, want ErrTooManyHidden and ErrConfig", err)
	}
}
