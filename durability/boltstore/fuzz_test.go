package boltstore

import (
	"slices"
	"testing"
)

// FuzzDecodeFrames feeds arbitrary log values to the log record decoder:
// it never panics, and what it decodes encodes back to records that decode
// the same.
func FuzzDecodeFrames(f *testing.F) {
	f.Add(encodeRecords([]record{{kind: putEvent, name: "a", index: 1, data: []byte("data")}}))
	f.Add(encodeRecords([]record{
		{kind: putSnapshot, compact: true, name: "session-1", index: 1 << 40, data: []byte("state")},
		{kind: deleteEvents, name: "b", index: 7},
		{kind: deleteSnapshots, name: "\x00\xff", index: ^uint64(0)},
		{kind: putEvent, name: "c", index: 0},
	}))
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Add([]byte{5, 0, 0, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, v []byte) {
		var recs []record
		err := decodeFrames(v, func(r record) {
			r.data = slices.Clone(r.data)
			recs = append(recs, r)
		})
		if err != nil {
			return
		}
		again := slices.Clone(recs)
		enc := encodeRecords(again)
		var back []record
		if err := decodeFrames(enc, func(r record) { back = append(back, r) }); err != nil {
			t.Fatalf("re-encoded records do not decode: %v", err)
		}
		if len(back) != len(recs) {
			t.Fatalf("%d records decoded back, want %d", len(back), len(recs))
		}
		for i := range recs {
			a, b := recs[i], back[i]
			if a.kind != b.kind || a.compact != b.compact || a.name != b.name || a.index != b.index || string(a.data) != string(b.data) {
				t.Fatalf("record %d: %+v decoded back as %+v", i, a, b)
			}
		}
	})
}
