//go:build race

package sandbox

// raceDetector: under the race detector every helper starts several
// times slower, so the tests that start hundreds run fewer.
const raceDetector = true
