// Package benchhook holds process-wide switches that benchmarks of this
// module turn to measure what a safety check costs against the same code
// without it, in the same run. It is internal so that no user of the
// module can turn a check off: nothing outside the module can import it.
package benchhook

import "sync/atomic"

// ChecksumsOff, when true, makes boltstore skip computing and checking
// record checksums. Data written with it on fails every check once it is
// off again: it exists for benchmarks only, never for a store that keeps
// data. The zero value (false) keeps checksums on.
var ChecksumsOff atomic.Bool

// CheckpointWhole, when true, makes boltstore move a due log into the
// buckets in one commit, as it did before checkpoints were split into
// steps: the baseline of the checkpoint figures.
var CheckpointWhole atomic.Bool

// TrackCommits, when true, makes boltstore record in MaxCommitWrites the
// most page writes one of its transactions made (bbolt's TxStats.Write).
var (
	TrackCommits    atomic.Bool
	MaxCommitWrites atomic.Int64
)
