package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// record is one write as the write-ahead log stores it.
type record struct {
	kind    writeKind
	compact bool // putSnapshot only: also delete what the snapshot covers
	// lostSnapshot (lostRecord only): the lost put was a snapshot.
	lostSnapshot bool
	// lostAfter (lostRecord only, in memory): the lost put was written
	// after a delete that covers its index, and no delete that covers
	// it was written after it (see [pendingActor.droppedLost]).
	lostAfter bool
	name      string
	index     uint64
	data      []byte
	sum       uint32 // durability.Checksum of the record (see recordKind)
}

// Record layout (formats 4 and 5): kind (1 byte), flags (1 byte, bit 0 =
// compact), name length (uvarint), name, index (8 bytes big-endian), the
// record's checksum (4 bytes: [durability.Checksum] over its kind, name,
// index and data, the one its bucket value will start with), the
// header's checksum (4 bytes: CRC-32C of every byte before it), data (the
// rest). Formats 2 and 3 have no checksums in records.
//
// The two checksums let a damaged log entry be read record by record: a
// record whose header checks names its actor and index for sure, so that
// damage to its data costs that actor alone (see [quarantine]).
const (
	flagCompact = 1
	recordSums  = 8
)

// recordLayout says whether log records carry their checksums.
type recordLayout bool

const (
	withSums    recordLayout = true  // formats 4 and 5
	withoutSums recordLayout = false // formats 2 and 3
)

// recordKind is the durability record kind a write's checksum is made
// with: its bucket value's kind for puts.
func recordKind(k writeKind) durability.RecordKind {
	if k == putSnapshot || k == deleteSnapshots {
		return durability.RecordSnapshot
	}
	return durability.RecordEvent
}

// size returns the length of the record's encoding.
func (r record) size() int {
	return 2 + uvarintLen(uint64(len(r.name))) + len(r.name) + 8 + recordSums + len(r.data)
}

// appendTo appends the record's encoding to b; r.sum must be set.
func (r record) appendTo(b []byte) []byte {
	var flags byte
	if r.compact {
		flags |= flagCompact
	}
	if r.lostSnapshot {
		flags |= flagLostSnapshot
	}
	start := len(b)
	b = append(b, byte(r.kind), flags)
	b = binary.AppendUvarint(b, uint64(len(r.name)))
	b = append(b, r.name...)
	b = binary.BigEndian.AppendUint64(b, r.index)
	b = binary.BigEndian.AppendUint32(b, r.sum)
	var hsum uint32
	if !benchhook.ChecksumsOff.Load() {
		hsum = durability.CRC32C(b[start:])
	}
	b = binary.BigEndian.AppendUint32(b, hsum)
	return append(b, r.data...)
}

// encodeRecords computes recs' checksums and frames them, in order, into
// one new buffer (each as its length as a uvarint, then the record), and
// points each record's data into that buffer, so that the store keeps no
// caller memory. Writers call it, so the checksums of concurrent writes
// are computed in parallel, not by the committer.
func encodeRecords(recs []record) []byte {
	n := 0
	off := benchhook.ChecksumsOff.Load()
	var check checker // a write's records have one name
	if len(recs) > 0 {
		check = checker{kind: recordKind(recs[0].kind), name: recs[0].name}
	}
	for i, r := range recs {
		switch {
		case off:
		case recordKind(r.kind) == check.kind && r.name == check.name:
			recs[i].sum = check.sum(r.index, r.data)
		default:
			recs[i].sum = durability.Checksum(recordKind(r.kind), r.name, r.index, r.data)
		}
		size := r.size()
		n += uvarintLen(uint64(size)) + size
	}
	b := make([]byte, 0, n)
	for i, r := range recs {
		b = binary.AppendUvarint(b, uint64(r.size()))
		b = recs[i].appendTo(b)
		recs[i].data = b[len(b)-len(r.data) : len(b) : len(b)]
	}
	return b
}

// uvarintLen is the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// nextFrame splits the first framed record off a log value: frame is the
// framing and the record, rest what follows.
func nextFrame(v []byte) (frame, rest []byte, err error) {
	n, size := binary.Uvarint(v)
	if size <= 0 || n > uint64(len(v)-size) {
		return nil, nil, errors.New("bad frame length")
	}
	return v[:size+int(n)], v[size+int(n):], nil
}

// errDataSum says a record's header checks but its data does not.
var errDataSum = errors.New("checksum mismatch in the record's data")

// decodeRecord parses a record; its data aliases b. With sums it checks
// the header's checksum (an error: the record cannot be trusted at all)
// and then the record's (errDataSum, with the record's header fields
// set: its kind, name and index are sure, its data is not).
func decodeRecord(b []byte, layout recordLayout) (record, error) {
	if len(b) < 2 || writeKind(b[0]) > lostRecord {
		return record{}, errors.New("bad record header")
	}
	r := record{kind: writeKind(b[0]), compact: b[1]&flagCompact != 0, lostSnapshot: b[1]&flagLostSnapshot != 0}
	n, size := binary.Uvarint(b[2:])
	rest := b[2:]
	fixed := uint64(8)
	if layout == withSums {
		fixed += recordSums
	}
	if size <= 0 || n > uint64(len(rest)-size) || uint64(len(rest)-size)-n < fixed {
		return record{}, errors.New("truncated record")
	}
	rest = rest[size:]
	r.name = string(rest[:n])
	r.index = binary.BigEndian.Uint64(rest[n : n+8])
	if layout == withoutSums {
		r.data = rest[n+8:]
		r.sum = durability.Checksum(recordKind(r.kind), r.name, r.index, r.data)
		return r, nil
	}
	r.sum = binary.BigEndian.Uint32(rest[n+8:])
	hsum := binary.BigEndian.Uint32(rest[n+12:])
	r.data = rest[n+16:]
	if benchhook.ChecksumsOff.Load() {
		return r, nil
	}
	headerLen := len(b) - len(rest) + int(n) + 12
	if durability.CRC32C(b[:headerLen]) != hsum {
		return record{}, errors.New("checksum mismatch in the record's header")
	}
	if durability.Checksum(recordKind(r.kind), r.name, r.index, r.data) != r.sum {
		return r, errDataSum
	}
	return r, nil
}

// decodeFrames calls fn with each record framed in a format 4 log value,
// in order; the records' data alias v. Any damage is an error.
func decodeFrames(v []byte, fn func(record)) error {
	return decodeFramesWith(v, withSums, func(r record, err error) error {
		if err != nil {
			return err
		}
		fn(r)
		return nil
	})
}

// decodeFramesWith calls fn with each record framed in a log value of
// layout, in order, and errDataSum for a record whose data is damaged (fn
// decides: its error stops the walk). A frame that cannot be parsed, or
// whose header is damaged, stops the walk with an error.
func decodeFramesWith(v []byte, layout recordLayout, fn func(record, error) error) error {
	for i := 0; len(v) > 0; i++ {
		frame, rest, err := nextFrame(v)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		_, size := binary.Uvarint(frame)
		r, err := decodeRecord(frame[size:], layout)
		if err != nil && !errors.Is(err, errDataSum) {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := fn(r, err); err != nil {
			return fmt.Errorf("record %d (%s %d of %s): %w", i, r.kind.what(), r.index, quote.Name(r.name, "actor name"), err)
		}
		v = rest
	}
	return nil
}
