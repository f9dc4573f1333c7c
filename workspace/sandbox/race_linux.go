//go:build linux && race

package sandbox

// Under the race detector a process sleeps a second at exit
// (GORACE=atexit_sleep_ms, default 1000) to let its threads report; the
// helper, which is this binary, needs none of that.
func init() { helperEnvExtra = append(helperEnvExtra, "GORACE=atexit_sleep_ms=0") }
