//go:build !race

package scripted_test

// raceDetector: see race_test.go.
const raceDetector = false
