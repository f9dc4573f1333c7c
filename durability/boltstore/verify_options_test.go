package boltstore_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability/boltstore"
)

// Verify refuses a negative OpenTimeout, as Open does, instead of
// replacing it with the default; zero still means the default.
func TestVerify_NegativeOpenTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := boltstore.Verify(path, &boltstore.Options{OpenTimeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "OpenTimeout") {
		t.Errorf("Verify with a negative OpenTimeout: %v, want an error naming OpenTimeout", err)
	}
	if _, err := boltstore.Verify(path, &boltstore.Options{}); err != nil {
		t.Errorf("Verify with OpenTimeout 0 (the default): %v", err)
	}
}
