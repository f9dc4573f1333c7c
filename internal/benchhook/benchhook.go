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
