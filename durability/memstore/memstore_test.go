package memstore_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/durabilitytest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	durabilitytest.Run(t, func(*testing.T) durability.Store { return memstore.New(nil) })
}

// TestNameLimit: names up to memstore.MaxNameLen bytes, the limit of
// the store with the smallest (pgstore's), so that code tested against
// memstore names its actors as every store takes them.
func TestNameLimit(t *testing.T) {
	durabilitytest.RunNameLimit(t, func(*testing.T) durability.Store { return memstore.New(nil) }, memstore.MaxNameLen)
}

func TestKeepHistory(t *testing.T) {
	s := memstore.New(&memstore.Options{KeepHistory: true})
	defer s.Close()
	ctx := t.Context()
	for i := range uint64(4) {
		if err := s.PersistEvent(ctx, "a", i, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PersistSnapshot(ctx, "a", 1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistSnapshot(ctx, "a", 3, []byte("three")); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.GetEvents(ctx, "a", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("KeepHistory store has %d events after snapshots, want 4", n)
	}
	if snap, ok, err := s.GetSnapshot(ctx, "a"); err != nil || !ok || snap.Index != 3 {
		t.Errorf("GetSnapshot = %+v, %v, %v; want index 3", snap, ok, err)
	}
}

// TestPersistEventAllocs: less than one allocation per call on average,
// the store's copies of small events being carved out of blocks.
func TestPersistEventAllocs(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	data := make([]byte, 100)
	i := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		_ = s.PersistEvent(t.Context(), "a", i%64, data) // overwrite: no map growth
		i++
	})
	if allocs > 0 {
		t.Errorf("PersistEvent allocates %.1f times per call, budget 0", allocs)
	}
}

// TestDamagedValues flips bytes inside stored events and snapshots through
// the Damage test hook: every read of a damaged record fails, no read
// returns data that differs from what was written.
func TestDamagedValues(t *testing.T) {
	durabilitytest.RunDamagedValues(t, 60, func(*testing.T) durability.Store { return memstore.New(nil) },
		func(t *testing.T, s durability.Store, name string, kind durability.RecordKind, index uint64, offset int) (durability.Store, error) {
			if !memstore.Damage(s.(*memstore.Store), name, kind, index, offset) {
				t.Fatalf("no %s %d of %q to damage", kind, index, name)
			}
			return s, nil
		})
}

// TestSalvage damages one event through the Damage test hook and
// salvages its actor (the conformance case every Salvager passes).
func TestSalvage(t *testing.T) {
	durabilitytest.RunSalvage(t, func(*testing.T) durability.Store { return memstore.New(nil) },
		func(t *testing.T, s durability.Store, name string, kind durability.RecordKind, index uint64, offset int) (durability.Store, error) {
			if !memstore.Damage(s.(*memstore.Store), name, kind, index, offset) {
				t.Fatalf("no %s %d of %q to damage", kind, index, name)
			}
			return s, nil
		})
}

// BenchmarkGetEvents_OneOfMany reads one event of an actor that holds
// many (a journal read back a record at a time): the read costs the
// events it returns, not the ones it skips.
func BenchmarkGetEvents_OneOfMany(b *testing.B) {
	s := memstore.New(nil)
	defer s.Close()
	const n = 100_000
	data := make([]byte, 100)
	for i := range uint64(n) {
		if err := s.PersistEvent(b.Context(), "journal", i, data); err != nil {
			b.Fatal(err)
		}
	}
	i := uint64(0)
	for b.Loop() {
		at := i * 7919 % n
		if err := s.GetEvents(b.Context(), "journal", at, at+1, func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkGetEvents_10k reads back an actor's 10 000 events of 100
// bytes (figure 4's read, on memstore): each is checked and copied.
func BenchmarkGetEvents_10k(b *testing.B) {
	s := memstore.New(nil)
	defer s.Close()
	const n = 10_000
	data := make([]byte, 100)
	for i := range uint64(n) {
		if err := s.PersistEvent(b.Context(), "recover", i, data); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(n * 100)
	for b.Loop() {
		if err := s.GetEvents(b.Context(), "recover", 0, 0, func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetEvents_Few reads back an actor's 8 events of 100 bytes
// (an actor recovered after its snapshot).
func BenchmarkGetEvents_Few(b *testing.B) {
	s := memstore.New(nil)
	defer s.Close()
	data := make([]byte, 100)
	for i := range uint64(8) {
		if err := s.PersistEvent(b.Context(), "recover", i, data); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if err := s.GetEvents(b.Context(), "recover", 0, 0, func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetSnapshot reads back a snapshot of 1 KiB.
func BenchmarkGetSnapshot(b *testing.B) {
	s := memstore.New(nil)
	defer s.Close()
	if err := s.PersistSnapshot(b.Context(), "recover", 7, make([]byte, 1024)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := s.GetSnapshot(b.Context(), "recover"); err != nil {
			b.Fatal(err)
		}
	}
}
