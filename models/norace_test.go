//go:build !race

package models_test

// raceDetector: see race_test.go.
const raceDetector = false
