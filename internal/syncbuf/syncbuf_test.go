package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines all arrive, whole (run it with -race).
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("ab\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab\n", 800) {
		t.Errorf("got %d bytes, want 800 whole lines", len(got))
	}
}
