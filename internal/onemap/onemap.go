// Package onemap is a map of string keys that keeps one entry out of its
// Go map. An actor that serves one stream at a time (a model adapter, a
// tool loop) then finds, adds and removes that stream's state without
// hashing its id, and makes no map at all until a second stream is open
// at once.
package onemap

// Map maps string keys to *V; its zero value is empty and ready. It is
// not safe for concurrent use.
type Map[V any] struct {
	oneKey string
	one    *V
	rest   map[string]*V
}

// Get returns the value of key, if it has one.
func (m *Map[V]) Get(key string) (*V, bool) {
	if m.one != nil && m.oneKey == key {
		return m.one, true
	}
	v, ok := m.rest[key]
	return v, ok
}

// Add gives key the value v. key must have none.
func (m *Map[V]) Add(key string, v *V) {
	switch {
	case m.one == nil:
		m.oneKey, m.one = key, v
	case m.rest == nil:
		m.rest = map[string]*V{key: v}
	default:
		m.rest[key] = v
	}
}

// Delete removes key and its value.
func (m *Map[V]) Delete(key string) {
	if m.one != nil && m.oneKey == key {
		m.oneKey, m.one = "", nil
		return
	}
	delete(m.rest, key)
}

// Len is the number of keys with a value.
func (m *Map[V]) Len() int {
	if m.one != nil {
		return 1 + len(m.rest)
	}
	return len(m.rest)
}

// Values returns every value, in no particular order.
func (m *Map[V]) Values() []*V {
	out := make([]*V, 0, m.Len())
	if m.one != nil {
		out = append(out, m.one)
	}
	for _, v := range m.rest {
		out = append(out, v)
	}
	return out
}
