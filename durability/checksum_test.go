package durability_test

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// TestChecksum_IsCRC32C checks Checksum against hash/crc32 over the bytes
// it documents (kind, uvarint name length, big-endian index, name, data),
// and that each part of the key changes it.
func TestChecksum_IsCRC32C(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, c := range []struct {
		kind  durability.RecordKind
		name  string
		index uint64
		data  string
	}{
		{durability.RecordEvent, "a", 0, ""},
		{durability.RecordSnapshot, "session-17", 1 << 40, "state"},
		{durability.RecordLog, "", 99, "frames"},
		{durability.RecordEvent, string(make([]byte, 300)), ^uint64(0), "long name"},
		{durability.RecordEvent, "sixteen-byte-nam", 0x0102030405060708, "hashed byte by byte"},
		{durability.RecordEvent, "seventeen-byte-na", 0x8070605040302010, "hashed by crc32.Update"},
	} {
		b := []byte{byte(c.kind)}
		b = binary.AppendUvarint(b, uint64(len(c.name)))
		b = binary.BigEndian.AppendUint64(b, c.index)
		b = append(b, c.name...)
		b = append(b, c.data...)
		if got, want := durability.Checksum(c.kind, c.name, c.index, []byte(c.data)), crc32.Checksum(b, tab); got != want {
			t.Errorf("Checksum(%v, %.10q, %d, %q) = %#x, want CRC-32C %#x", c.kind, c.name, c.index, c.data, got, want)
		}
	}
	base := durability.Checksum(durability.RecordEvent, "ab", 1, []byte("c"))
	for what, other := range map[string]uint32{
		"kind":  durability.Checksum(durability.RecordSnapshot, "ab", 1, []byte("c")),
		"name":  durability.Checksum(durability.RecordEvent, "a", 1, []byte("bc")),
		"index": durability.Checksum(durability.RecordEvent, "ab", 2, []byte("c")),
		"data":  durability.Checksum(durability.RecordEvent, "ab", 1, []byte("d")),
	} {
		if other == base {
			t.Errorf("changing the %s leaves the checksum unchanged", what)
		}
	}
	data := []byte("data")
	if n := testing.AllocsPerRun(100, func() { durability.Checksum(durability.RecordEvent, "name", 7, data) }); n != 0 {
		t.Errorf("Checksum allocates %.0f times", n)
	}
}

// BenchmarkChecksum is the checksum of a 100-byte event, about one
// argument chunk, as every read and write of one computes it.
func BenchmarkChecksum(b *testing.B) {
	data := make([]byte, 100)
	b.SetBytes(int64(len(data)))
	for i := uint64(0); b.Loop(); i++ {
		durability.Checksum(durability.RecordEvent, "router", i, data)
	}
}

// TestSummer_MatchesChecksum checks a Summer against Checksum over
// indexes in order, backwards, at random and at the extremes, for short
// and long names and both kinds, and that it does not allocate.
func TestSummer_MatchesChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 4))
	for _, name := range []string{"r", "router", "sixteen-byte-nam", string(make([]byte, 200)), strings.Repeat("x", 300)} {
		for _, kind := range []durability.RecordKind{durability.RecordEvent, durability.RecordSnapshot} {
			s := durability.NewSummer(kind, name)
			var indexes []uint64
			for i := range uint64(300) {
				indexes = append(indexes, i)
			}
			for i := range uint64(50) {
				indexes = append(indexes, 1000-i, rng.Uint64(), rng.Uint64N(1<<20), ^uint64(0)-i, 1<<(i%64))
			}
			for _, idx := range indexes {
				data := make([]byte, rng.IntN(300))
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				if got, want := s.Sum(idx, data), durability.Checksum(kind, name, idx, data); got != want {
					t.Fatalf("Summer(%v, %.10q).Sum(%d, %d bytes) = %#x, Checksum = %#x", kind, name, idx, len(data), got, want)
				}
			}
		}
	}
	s := durability.NewSummer(durability.RecordEvent, "router")
	data := make([]byte, 100)
	i := uint64(0)
	if n := testing.AllocsPerRun(100, func() { i++; s.Sum(i, data) }); n != 0 {
		t.Errorf("Summer.Sum allocates %.0f times", n)
	}
}

// BenchmarkSummer is BenchmarkChecksum through a Summer, for events read
// in index order.
func BenchmarkSummer(b *testing.B) {
	data := make([]byte, 100)
	s := durability.NewSummer(durability.RecordEvent, "router")
	b.SetBytes(int64(len(data)))
	for i := uint64(0); b.Loop(); i++ {
		s.Sum(i, data)
	}
}
