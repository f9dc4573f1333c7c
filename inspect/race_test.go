//go:build race

package inspect_test

// raceDetector: the race detector instruments allocations (and its
// sync.Pool drops some of what is put back), so allocation budgets are
// not checked under it.
const raceDetector = true
