//go:build !race

package boltstore

const raceDetector = false
