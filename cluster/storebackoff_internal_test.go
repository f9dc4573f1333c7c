package cluster

import (
	"testing"
	"time"
)

// TestDefaultStoreRetries_CoversAFailover: with the default bound, Run
// waits out an ordinary PostgreSQL failover (a managed Multi-AZ failover
// takes one to two minutes) before it fails with ErrStoreFailing: the
// backoffs of DefaultStoreRetries retries add up to two minutes at least.
func TestDefaultStoreRetries_CoversAFailover(t *testing.T) {
	var total time.Duration
	for n := 1; n <= DefaultStoreRetries; n++ {
		total += storeBackoff(n)
	}
	if total < 2*time.Minute {
		t.Fatalf("DefaultStoreRetries %d waits %v in all before Run fails; want at least 2m0s, as long as a failover may take", DefaultStoreRetries, total)
	}
	t.Logf("DefaultStoreRetries %d: Run waits %v in all", DefaultStoreRetries, total)
}
