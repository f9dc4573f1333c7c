//go:build !race

package tools

// raceDetector: see race_test.go.
const raceDetector = false
