//go:build !race

package sandbox

// raceDetector: see race_test.go.
const raceDetector = false
