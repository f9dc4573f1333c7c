//go:build !unix

package main

import "time"

// processCPU cannot be read here: 0, and no CPU figure is reported.
func processCPU() time.Duration { return 0 }
