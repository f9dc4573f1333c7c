package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"
)

// einoModule is the module whose version the result line reports.
const einoModule = "github.com/cloudwego/eino"

// result is the JSON line the peer prints.
type result struct {
	Peer       string  `json:"peer"`
	Version    string  `json:"version"`
	Runtime    string  `json:"runtime"`
	Runs       int     `json:"runs"`
	Seconds    float64 `json:"seconds"`
	RunsPerSec float64 `json:"runs_per_sec"`
	NsPerRun   float64 `json:"ns_per_run"`
	// CPUNsPerRun is the process's CPU time (user and system, garbage
	// collection included) per measured run; 0 when it cannot be read.
	CPUNsPerRun float64 `json:"cpu_ns_per_run,omitempty"`
}

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
}

// mainCode runs the peer with args and returns the process exit code.
func mainCode(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eino", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 1000, "measured runs of the conversation")
	stream := fs.Bool("stream", false, "play the streaming conversation with Agent.Stream")
	warmup := fs.Int("warmup", 100, "unmeasured runs before measuring")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *runs < 1 || *warmup < 0 {
		fmt.Fprintln(stderr, "eino peer: usage: go run . [--runs N>=1] [--warmup K>=0]")
		return 2
	}

	res, err := measure(context.Background(), *runs, *warmup, *stream)
	if err != nil {
		fmt.Fprintf(stderr, "eino peer: %v\n", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintf(stderr, "eino peer: write result: %v\n", err)
		return 1
	}
	return 0
}

// measure builds the conversation, plays it warmup times, then times runs
// plays of it.
func measure(ctx context.Context, runs, warmup int, streamed bool) (result, error) {
	c, err := newConversation(ctx, streamed)
	if err != nil {
		return result{}, err
	}
	for i := range warmup {
		if err := c.run(ctx); err != nil {
			return result{}, fmt.Errorf("warmup run %d: %w", i, err)
		}
	}
	start, cpu := time.Now(), processCPU()
	for i := range runs {
		if err := c.run(ctx); err != nil {
			return result{}, fmt.Errorf("run %d: %w", i, err)
		}
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu
	peer := "eino"
	if streamed {
		peer = "eino-stream"
	}
	return result{
		Peer:       peer,
		Version:    moduleVersion(einoModule),
		Runtime:    runtime.Version(),
		Runs:       runs,
		Seconds:    elapsed.Seconds(),
		RunsPerSec: float64(runs) / elapsed.Seconds(),
		NsPerRun:   float64(elapsed.Nanoseconds()) / float64(runs),
		// Both readings 0 (no CPU clock) or one run too short to tick: none.
		CPUNsPerRun: float64(cpu.Nanoseconds()) / float64(runs),
	}, nil
}

// moduleVersion returns the version of module path linked into this binary,
// or "unknown" when the build carries no module information.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}
