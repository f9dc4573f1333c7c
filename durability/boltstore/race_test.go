//go:build race

package boltstore

// raceDetector is true in a -race build, where the campaigns run a part of
// their seeds (see campaignSeeds).
const raceDetector = true
