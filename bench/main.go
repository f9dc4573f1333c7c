package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// jsonFlag is -json (to stdout) or -json=FILE / -json FILE.
type jsonFlag struct {
	set  bool
	path string
}

func (j *jsonFlag) String() string   { return j.path }
func (j *jsonFlag) IsBoolFlag() bool { return true }
func (j *jsonFlag) Set(v string) error {
	j.set = true
	switch v {
	case "true", "-":
		j.path = ""
	case "false":
		j.set = false
	default:
		j.path = v
	}
	return nil
}

func main() {
	if servePeer() { // started again as the far side of a round trip
		return
	}
	testing.Init()
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is the harness with its arguments; it prints the table on stdout.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "a shorter pass: fewer rounds, shorter measurements, fewer sessions")
	var js jsonFlag
	fs.Var(&js, "json", "also write the results as JSON: -json alone to stdout (instead of the table), -json FILE to a file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file`")
	memprofile := fs.String("memprofile", "", "write an allocation profile at the end of the run to `file`")
	rounds := fs.Int("rounds", 0, "measure each pair this many times, interleaved (default 5, 3 with -quick)")
	filter := fs.String("filter", "", "run only the cases whose \"<figure> <case>\" matches this `regexp` (e.g. '^2 ' or 'ai-sdk')")
	skip := fs.String("skip", "", "leave out the cases whose \"<figure> <case>\" matches this `regexp` (after -filter; e.g. 'eino|ai-sdk')")
	benchtime := fs.Duration("benchtime", 0, "time of one measurement (default 300ms, 100ms with -quick)")
	peers := fs.String("peers", "", "`folder` of the figure 7 peers (default: bench/peers of the current module)")
	noPeers := fs.Bool("no-peers", false, "do not run the figure 7 peers")
	smoke := fs.Bool("smoke", false, "tiny sizes and one iteration per measurement: checks that everything runs, measures nothing")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench [flags]\n\nRuns every figure against its baseline, interleaved, and prints one table.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if js.set && js.path == "" && fs.NArg() == 1 {
		js.path = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	c := &config{rounds: 5, benchtime: "300ms", quick: *quick, smoke: *smoke, progress: stderr}
	if *quick {
		c.rounds, c.benchtime = 3, "100ms"
	}
	if *smoke {
		c.rounds, c.benchtime = 1, "1x"
	}
	if *rounds > 0 {
		c.rounds = *rounds
	}
	if *benchtime > 0 {
		c.benchtime = benchtime.String()
	}
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			return fmt.Errorf("-filter: %w", err)
		}
		c.filter = re
	}
	if *skip != "" {
		re, err := regexp.Compile(*skip)
		if err != nil {
			return fmt.Errorf("-skip: %w", err)
		}
		c.skip = re
	}
	if !*noPeers {
		c.peers = *peers
		if c.peers == "" {
			c.peers = defaultPeersDir()
		}
	}
	if err := flag.Set("test.benchtime", c.benchtime); err != nil {
		return fmt.Errorf("set benchtime: %w", err)
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	mode := "full"
	switch {
	case c.smoke:
		mode = "smoke"
	case c.quick:
		mode = "quick"
	}
	rep := Report{Date: time.Now().UTC(), Machine: machine(), Mode: mode, Rounds: c.rounds}
	start := time.Now()
	for _, f := range figures {
		c.logf("figure %s: %s", f.id, f.title)
		rep.Rows = append(rep.Rows, f.run(c)...)
	}
	c.logf("done in %v", time.Since(start).Round(time.Second))

	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}

	fmt.Fprintf(stderr, "\n%s, %s, %d CPUs, %s; %s run, %d rounds of %s\n",
		rep.Date.Format("2006-01-02 15:04 MST"), rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.Go, mode, c.rounds, c.benchtime)
	if js.set && js.path == "" {
		return writeJSON(stdout, rep)
	}
	if err := writeTable(stdout, rep.Rows); err != nil {
		return err
	}
	if js.set {
		f, err := os.Create(js.path)
		if err != nil {
			return err
		}
		if err := writeJSON(f, rep); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

// defaultPeersDir finds bench/peers from the module root or bench/.
func defaultPeersDir() string {
	for _, d := range []string{"bench/peers", "peers"} {
		if _, err := os.Stat(filepath.Join(d, "setup.sh")); err == nil {
			abs, err := filepath.Abs(d)
			if err == nil {
				return abs
			}
		}
	}
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output(); err == nil {
		d := filepath.Join(strings.TrimSpace(string(out)), "bench", "peers")
		if _, err := os.Stat(filepath.Join(d, "setup.sh")); err == nil {
			return d
		}
	}
	return ""
}

// Machine says where a run happened.
type Machine struct {
	CPUs int    `json:"cpus"`
	CPU  string `json:"cpu"`
	Go   string `json:"go"`
	OS   string `json:"os"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, CPU: "unknown CPU"}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
