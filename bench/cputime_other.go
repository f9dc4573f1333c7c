//go:build !unix

package main

import "time"

// processCPU is 0: the CPU time of the process is read on Unix only (the
// rows that need it report no metric elsewhere).
func processCPU() time.Duration { return 0 }
