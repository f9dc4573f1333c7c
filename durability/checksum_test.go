package durability_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
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

// TestSummer_CopySum checks CopySum against Checksum and the copy against
// its data, for every length up to 300 at every alignment within a word
// (the copy hashes 32, 8, 4, 2 and 1 bytes a step), for indexes in and
// out of order; that it writes no byte of dst past len(src), refuses a
// dst shorter than src, and does not allocate.
func TestSummer_CopySum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 21))
	buf := make([]byte, 320)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	dst := make([]byte, 310)
	for _, name := range []string{"router", strings.Repeat("n", 40)} {
		s := durability.NewSummer(durability.RecordSnapshot, name)
		for n := range 301 {
			for align := range 8 {
				data := buf[align : align+n]
				for i := range dst {
					dst[i] = 0xee
				}
				index := uint64(n*8+align) ^ rng.Uint64N(3)<<rng.UintN(64)
				sum := s.CopySum(index, dst, data)
				if want := durability.Checksum(durability.RecordSnapshot, name, index, data); sum != want {
					t.Fatalf("CopySum(%d, %d bytes at +%d) = %#x, Checksum = %#x", index, n, align, sum, want)
				}
				if !bytes.Equal(dst[:n], data) {
					t.Fatalf("CopySum(%d, %d bytes at +%d): copy %x, want %x", index, n, align, dst[:n], data)
				}
				if len(bytes.Trim(dst[n:], "\xee")) != 0 {
					t.Fatalf("CopySum(%d, %d bytes at +%d) wrote past the copy: %x", index, n, align, dst[n:])
				}
			}
		}
	}
	s := durability.NewSummer(durability.RecordEvent, "router")
	data := make([]byte, 100)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("CopySum into a dst shorter than src did not panic")
			}
		}()
		s.CopySum(1, make([]byte, 99, 100), data)
	}()
	i := uint64(0)
	if n := testing.AllocsPerRun(100, func() { i++; s.CopySum(i, dst, data) }); n != 0 {
		t.Errorf("CopySum allocates %.0f times", n)
	}
}

// BenchmarkSummer_CopySum is what a store's read of a 100-byte event
// costs with its check: the copy, allocated, and the checksum (compare
// with BenchmarkCopy, the copy alone, and BenchmarkSummer).
func BenchmarkSummer_CopySum(b *testing.B) {
	for _, n := range []int{100, 2 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		data := make([]byte, n)
		dst := make([]byte, n)
		s := durability.NewSummer(durability.RecordEvent, "router")
		b.Run(fmt.Sprintf("CopySum/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := uint64(0); b.Loop(); i++ {
				s.CopySum(i, dst, data)
			}
		})
		b.Run(fmt.Sprintf("copy-then-sum/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := uint64(0); b.Loop(); i++ {
				copy(dst, data)
				s.Sum(i, dst)
			}
		})
	}
}

// BenchmarkCopy is the copy of a 100-byte event a store's read makes
// without checks.
func BenchmarkCopy(b *testing.B) {
	data := make([]byte, 100)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_ = append(make([]byte, 0, len(data)), data...)
	}
}

// TestCRC32C checks CRC32C against hash/crc32 for lengths around its
// steps (32, 8, 4, 2, 1 bytes) and around the size from which it hands
// over to crc32, and that it does not allocate.
func TestCRC32C(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	buf := make([]byte, 3000)
	for i := range buf {
		buf[i] = byte(i*31 + 7)
	}
	for n := range 80 {
		for _, p := range [][]byte{buf[:n], buf[3 : 3+n], buf[1000-n : 1000+n], buf[:1000+n], buf[n:]} {
			if got, want := durability.CRC32C(p), crc32.Checksum(p, tab); got != want {
				t.Fatalf("CRC32C(%d bytes) = %#x, want %#x", len(p), got, want)
			}
		}
	}
	p := buf[:25]
	if n := testing.AllocsPerRun(100, func() { durability.CRC32C(p) }); n != 0 {
		t.Errorf("CRC32C allocates %.0f times", n)
	}
}
