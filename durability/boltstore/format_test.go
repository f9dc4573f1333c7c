package boltstore

import (
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// fileFormat reads the format version recorded in the store file at path,
// with bbolt alone (it reads no bucket but "polyweave").
func fileFormat(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.View(func(tx *bolt.Tx) error { v = string(tx.Bucket(metaBucket).Get(formatKey)); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// setFileFormat records version as the format of the store file at path,
// as a binary that writes it would have.
func setFileFormat(t *testing.T, path, version string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(formatKey, []byte(version)) })
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestFormat_SetAside: a file holds format "6" exactly while it holds a
// bucket set aside by Salvage, so that a binary that does not know that
// bucket (it reads format "5" at most) refuses the file naming its format
// instead of reading the set-aside pages as damage; a file without one
// stays "5", readable by those binaries. This binary reads both, and marks
// a "5" file with a set-aside bucket (written before the bump) "6".
func TestFormat_SetAside(t *testing.T) {
	path, want := pagesFile(t, false)
	if v := fileFormat(t, path); v != formatVersion {
		t.Fatalf("a new file has format %q, want %q", v, formatVersion)
	}
	zeroBigActorPage(t, path)
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSalvaged(t, s, "big", want["big"], "set aside")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := fileFormat(t, path); v != formatVersionSetAside {
		t.Fatalf("after Salvage set a bucket aside, format %q, want %q", v, formatVersionSetAside)
	}
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of format %q: %v", formatVersionSetAside, err)
	}
	if failed := checkPages(t, ro, want, "format 6, read-only"); len(failed) > 0 {
		t.Errorf("format 6, read-only: %q fail", failed)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := Verify(path, nil); err != nil || !r.Intact() || r.Format != formatVersionSetAside || len(r.SetAside) != 1 {
		t.Fatalf("Verify of format %q: %v %+v", formatVersionSetAside, err, r)
	}

	// As the binary before the bump left it: "5" with a set-aside bucket.
	setFileFormat(t, path, formatVersion)
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatalf("Open of format %q with a set-aside bucket: %v", formatVersion, err)
	}
	if failed := checkPages(t, s, want, "format 5 with a set-aside bucket"); len(failed) > 0 {
		t.Errorf("format 5 with a set-aside bucket: %q fail", failed)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := fileFormat(t, path); v != formatVersionSetAside {
		t.Fatalf("a writable Open of format %q with a set-aside bucket left format %q, want %q", formatVersion, v, formatVersionSetAside)
	}

	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := fileFormat(t, path); v != formatVersion {
		t.Fatalf("after Compact dropped the set-aside bucket, format %q, want %q", v, formatVersion)
	}

	// A format this binary does not know is refused, naming it.
	setFileFormat(t, path, "7")
	if s, err := Open(path, &Options{NoSync: true}); err == nil || !strings.Contains(err.Error(), `format "7"`) {
		if err == nil {
			s.Close()
		}
		t.Errorf("Open of format \"7\": %v, want a refusal naming the format", err)
	}
}
