package memstore

import "github.com/polyweave/polyweave-go/durability"

// Damage flips bits of byte offset of the data of name's record of kind at
// index, in the store's own memory, as a stray write would. It reports
// whether the record exists.
func Damage(s *Store, name string, kind durability.RecordKind, index uint64, offset int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[name]
	if l == nil {
		return false
	}
	var stored []byte
	switch {
	case kind == durability.RecordSnapshot:
		stored = l.snapshots[index]
	case l.events.sparse != nil:
		stored = l.events.sparse[index]
	case index >= l.events.base && index-l.events.base < uint64(len(l.events.slots)-l.events.head):
		stored = l.events.slots[l.events.head+int(index-l.events.base)]
	}
	if offset < 0 || crcSize+offset >= len(stored) {
		return false
	}
	stored[crcSize+offset] ^= 0x5a
	return true
}
