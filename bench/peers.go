package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Figure 7 peers: other frameworks playing the same conversation in their
// own process (bench/peers/README.md). Each prints one JSON line.

// peerResult is the line a peer prints.
type peerResult struct {
	Peer       string  `json:"peer"`
	Version    string  `json:"version"`
	Runtime    string  `json:"runtime"`
	Runs       int     `json:"runs"`
	RunsPerSec float64 `json:"runs_per_sec"`
	NsPerRun   float64 `json:"ns_per_run"`
	// CPUNsPerRun is the peer process's CPU time per run (the Eino peer
	// reports it); 0 when not reported.
	CPUNsPerRun float64 `json:"cpu_ns_per_run"`
}

// peer is a runnable peer, or why it cannot run.
type peer struct {
	name    string
	dir     string
	command []string // with --runs/--warmup appended
	env     []string
	// unready says why the peer cannot run; empty when it can.
	unready string
	version string
}

// preparePeers runs setup.sh and returns the peers, each ready or with
// the reason it is not. scratch receives the built eino binary.
func preparePeers(ctx context.Context, dir, scratch string) []*peer {
	aisdk := &peer{name: "ai-sdk", dir: filepath.Join(dir, "ai-sdk"), command: []string{"node", "run.mjs"}}
	eino := &peer{name: "eino", dir: filepath.Join(dir, "eino"), env: []string{"GOWORK=off"}}
	peers := []*peer{aisdk, eino}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "setup.sh"))
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	report := stdout.String() + stderr.String()
	for _, p := range peers {
		switch {
		case strings.Contains(report, "peer "+p.name+": ready"):
		case strings.Contains(report, "peer "+p.name+": could not be prepared: "):
			_, reason, _ := strings.Cut(report, "peer "+p.name+": could not be prepared: ")
			reason, _, _ = strings.Cut(reason, "\n")
			p.unready = "could not be prepared: " + reason
		case err != nil:
			p.unready = fmt.Sprintf("setup.sh failed: %v: %s", err, lastLine(report))
		default:
			p.unready = "setup.sh did not report it ready"
		}
	}
	if eino.unready == "" {
		bin := filepath.Join(scratch, "eino-peer")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		build.Dir, build.Env = eino.dir, append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			eino.unready = fmt.Sprintf("go build failed: %v: %s", err, lastLine(string(out)))
		}
		eino.command = []string{bin}
	}
	return peers
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// run plays runs conversations (after warmup unmeasured ones) and returns
// the peer's own measurement; extra are more arguments ("--stream").
func (p *peer) run(ctx context.Context, runs, warmup int, extra ...string) (peerResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := append(append(p.command[1:len(p.command):len(p.command)], extra...), "--runs", strconv.Itoa(runs), "--warmup", strconv.Itoa(warmup))
	cmd := exec.CommandContext(ctx, p.command[0], args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return peerResult{}, fmt.Errorf("peer %s: %v: %s", p.name, err, lastLine(stderr.String()))
	}
	var res peerResult
	if err := json.Unmarshal([]byte(lastLine(stdout.String())), &res); err != nil {
		return peerResult{}, fmt.Errorf("peer %s: bad output %q: %v", p.name, stdout.String(), err)
	}
	if res.Runs != runs || res.NsPerRun <= 0 {
		return peerResult{}, fmt.Errorf("peer %s: reported %d runs at %v ns", p.name, res.Runs, res.NsPerRun)
	}
	p.version = res.Peer + " " + res.Version + " on " + res.Runtime
	return res, nil
}

// cpuSide measures the peer's CPU time per run (see peerResult), for the
// rows per CPU second: on a busy machine they compare what a run costs,
// whatever share of the machine each process gets.
func (p *peer) cpuSide(runs, warmup int, extra ...string) side {
	s := p.side(runs, warmup, extra...)
	s.name += ", per CPU second"
	s.measure = func() sample {
		res, err := p.run(context.Background(), runs, warmup, extra...)
		if err == nil && res.CPUNsPerRun <= 0 {
			err = fmt.Errorf("peer %s reports no CPU time", p.name)
		}
		if err != nil {
			return sample{err: err}
		}
		return sample{ns: res.CPUNsPerRun}
	}
	return s
}

// side measures the peer as one contestant of a pair.
func (p *peer) side(runs, warmup int, extra ...string) side {
	name := p.name
	if len(extra) > 0 {
		name += " " + strings.Join(extra, " ")
	}
	return side{name: name, measure: func() sample {
		res, err := p.run(context.Background(), runs, warmup, extra...)
		if err != nil {
			return sample{err: err}
		}
		return sample{ns: res.NsPerRun}
	}}
}
