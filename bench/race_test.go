//go:build race

package main

// raceDetector: the race detector drops sync.Pool items at random and
// instruments allocations, so allocation budgets are not checked under it.
const raceDetector = true
