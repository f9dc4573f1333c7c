// Package syncbuf has a bytes.Buffer that goroutines can share, for
// tests that read what loggers and child processes wrote.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer, written and read under a lock. Its zero
// value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
