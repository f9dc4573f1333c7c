package durability_test

import (
	"encoding/binary"
	"hash/crc32"
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
