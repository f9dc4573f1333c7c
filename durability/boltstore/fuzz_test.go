package boltstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability"
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

// FuzzOpen_DamagedFile changes two bytes of a real store file (16
// sessions, part checkpointed, part in a log left by a crash) at offsets
// the fuzzer picks, then opens it and reads every session: Open fails
// with a *durability.StoreError, or every read returns exactly what was
// written or fails saying the data is damaged. Nothing panics.
func FuzzOpen_DamagedFile(f *testing.F) {
	d, orig := campaignFile(f, 16)
	f.Add(uint32(0), byte(0xff), uint32(4096), byte(0x01)) // both meta pages
	f.Add(uint32(len(orig)/2), byte(0x10), uint32(len(orig)/2+1), byte(0x20))
	f.Add(uint32(len(orig)-100), byte(0x80), uint32(len(orig)-4000), byte(0x04))
	f.Fuzz(func(t *testing.T, at1 uint32, x1 byte, at2 uint32, x2 byte) {
		b := bytes.Clone(orig)
		b[int(at1%uint32(len(b)))] ^= x1
		b[int(at2%uint32(len(b)))] ^= x2
		path := filepath.Join(t.TempDir(), "fuzz.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, &Options{NoSync: true, OpenTimeout: time.Second})
		if err != nil {
			var se *durability.StoreError
			if !errors.As(err, &se) {
				t.Fatalf("Open: %v, not a *durability.StoreError", err)
			}
			return
		}
		o, problems := d.Check(t, s)
		if err := s.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
			t.Errorf("Close: %v", err)
		}
		if o.Different+o.Other > 0 {
			t.Fatalf("%+v: %s", o, strings.Join(problems, "; "))
		}
	})
}
