//go:build !race

package inspect_test

// raceDetector: see race_test.go.
const raceDetector = false
