//go:build race

package cluster_test

// raceDetector: the race detector slows the member processes several
// times over, so the kill test runs a smaller cluster workload under it.
const raceDetector = true
