package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// LinkTargets keeps the places set-ups found, and drops a place once
// it no longer exists, when another is added: a place gone holds no
// secret, and the set does not grow with names commands made and
// removed.
func TestLinkTargetsDropPlacesGone(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Config{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	same := cfg // copies share the set
	same.LinkTargets.add([]string{a})
	if got := cfg.LinkTargets.Paths(); !slices.Equal(got, []string{a}) {
		t.Fatalf("after adding %s: %q", a, got)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	cfg.LinkTargets.add([]string{b})
	if got := cfg.LinkTargets.Paths(); !slices.Equal(got, []string{b}) {
		t.Errorf("after %s was removed and %s added: %q", a, b, got)
	}
	if got := (*LinkTargets)(nil).Paths(); got != nil {
		t.Errorf("a nil set: %q", got)
	}
}
