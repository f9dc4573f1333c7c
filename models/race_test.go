//go:build race

package models_test

// raceDetector: the race detector instruments allocations, so allocation
// budgets are not checked under it.
const raceDetector = true
