//go:build !race

package cluster_test

// raceDetector: see race_test.go.
const raceDetector = false
