package boltstore

import "sync/atomic"

// checksumsOff, set by SetChecksumsForBenchmark, skips computing and
// checking checksums.
var checksumsOff atomic.Bool

// SetChecksumsForBenchmark turns the computing and checking of record
// checksums off (false) or back on (true) for every Store of the process,
// so that a benchmark can measure what they cost against the same code
// without them, in the same run. Data written with checksums off fails
// every check once they are on again: this exists for benchmarks only,
// never for a store that keeps data.
func SetChecksumsForBenchmark(on bool) { checksumsOff.Store(!on) }
