//go:build race

package tools

// raceDetector: the race detector instruments allocations, so allocation
// budgets are not checked under it.
const raceDetector = true
