package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
)

// BenchmarkDiskFsync measures the disk's floor for durable writes.
func BenchmarkDiskFsync(b *testing.B) { benchDiskFsync(b) }

// BenchmarkPersistEvent reports events/s for ~100-byte events, one writer
// per actor name, against bbolt's own db.Batch with its defaults.
func BenchmarkPersistEvent(b *testing.B) {
	for _, c := range []struct {
		name    string
		writers int
		open    storeOpener
	}{
		{"memstore/writers=1", 1, openMem},
		{"memstore/writers=64", 64, openMem},
		{"bolt/writers=1", 1, openBolt(nil)},
		{"bolt/writers=64", 64, openBolt(nil)},
		{"bolt/writers=256", 256, openBolt(nil)},
		{"bolt-delay200µs/writers=64", 64, openBolt(&boltstore.Options{MaxBatchDelay: 200 * time.Microsecond})},
		{"bolt-nosync/writers=64", 64, openBolt(&boltstore.Options{NoSync: true})},
	} {
		b.Run(c.name, func(b *testing.B) { benchPersist(b, c.writers, c.open) })
	}
	b.Run("bbolt-Batch-defaults/writers=64", func(b *testing.B) { benchBoltBatch(b, 64) })
	b.Run("provider-bolt/writers=64", func(b *testing.B) { benchProviderPersist(b, 64) })
}

// BenchmarkRecover reports the time to read back 10 000 pending entries.
func BenchmarkRecover(b *testing.B) {
	for _, st := range []struct {
		name string
		open func() (durability.Store, error)
	}{
		{"memstore", func() (durability.Store, error) { return openMem(b), nil }},
		{"bolt", func() (durability.Store, error) { return noSyncBolt(filepath.Join(b.TempDir(), "recover.db")) }},
	} {
		s, err := st.open()
		if err != nil {
			b.Fatal(err)
		}
		if err := fillRecovery(s); err != nil {
			b.Fatal(err)
		}
		rs := recoveryStore{name: st.name, s: s}
		b.Run(st.name+"/GetEvents", rs.benchGetEvents)
		b.Run(st.name+"/GetSnapshot-10000-entries", rs.benchBigSnapshot)
		b.Run(st.name+"/GetSnapshot-10000-names", rs.benchNamedSnapshots)
		s.Close()
	}
	path := filepath.Join(b.TempDir(), "reopen.db")
	if err := newRecoveryFile(path); err != nil {
		b.Fatal(err)
	}
	b.Run("bolt/Open+GetSnapshot+GetEvents", func(b *testing.B) { benchReopen(b, path) })
	b.Run("provider-bolt/GetEvents", benchProviderGetEvents)
}

// BenchmarkChecksumsAB is figure 4's checksums-on-vs-off rows as plain
// benchmarks: each op is a pair of turns, one with checksums and one
// without (see runAB), each from a collected heap; it reports each side's
// wall and CPU time per item and their ratios (on/off: above 1 is slower
// with checksums), each the geometric mean of the middle half of the pairs' ratios (see
// pairRatio).
func BenchmarkChecksumsAB(b *testing.B) {
	for _, c := range []struct {
		name  string
		setup abSetup
	}{
		{"persist/bolt/writers=64", persistAB(64, 8, nil)},
		{"persist/bolt-nosync/writers=64", persistAB(64, noSyncBurst(64), &boltstore.Options{NoSync: true})},
		{"read/bolt/10000-events", readAB},
		{"router-chunks/bolt/streams=64", routerChunksAB(64, 2)},
		{"router-recovery/bolt/10000-calls", routerRecoveryAB},
		{"loop-1MiB/bolt", loopBigArgAB(1)},
	} {
		b.Run(c.name, func(b *testing.B) {
			fx := c.setup(b, checksumsAB)
			if fx.done != nil {
				defer fx.done()
			}
			b.ReportAllocs()
			t := runAB(b, fx, checksumsAB, pairRun{gc: true})
			b.StopTimer()
			for side, name := range []string{"on", "off"} {
				n := float64(t.items[side])
				b.ReportMetric(float64(t.wall[side].Nanoseconds())/n, name+"-ns/item")
				b.ReportMetric(float64(t.cpu[side].Nanoseconds())/n, name+"-cpu-ns/item")
			}
			b.ReportMetric(pairRatio(t.wallRatios), "wall-ratio")
			b.ReportMetric(pairRatio(t.cpuRatios), "cpu-ratio")
		})
	}
}
