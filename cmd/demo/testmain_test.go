package main

import (
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// buildDir is TestMain's temporary folder, for the binaries the tests
// build; TestMain removes it once they have run.
var buildDir string

// TestMain builds the binaries that tests run, in the background while
// the tests that need none run (see startBuild), runs the tests and
// checks that the in-process ones left no goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-e2e-")
	buildDir = dir
	if err != nil {
		fmt.Fprintln(os.Stderr, "make build folder:", err)
		os.Exit(1)
	}
	if err := startBuild(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if err := waitBuild(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaries is TestMain's build of the binaries the tests run.
var binaries struct {
	cmd     *exec.Cmd
	pkgs    []string
	output  *os.File // the go command's output
	waiting sync.Mutex
	done    bool
	err     error
}

// startBuild starts building, into dir, cmd/polyweave-mcp (for the tests
// of -mcp) and, unless under the race detector, the demo (for the tests
// that run it: see buildDemo), with one go command, which links them at
// once. The command runs on its own, its output going to a file: it
// starts no goroutine in this process, which the in-process tests' leak
// checks would see.
func startBuild(dir string) error {
	mcpServerBin = filepath.Join(dir, "polyweave-mcp")
	binaries.pkgs = []string{"../polyweave-mcp"}
	if demo := buildDemo(dir); demo != "" {
		binaries.pkgs = append(binaries.pkgs, demo)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	if binaries.output, err = os.Create(filepath.Join(dir, "build.log")); err != nil {
		return err
	}
	binaries.cmd = exec.Command(goTool, append([]string{"build", "-o", dir + string(filepath.Separator)}, binaries.pkgs...)...)
	binaries.cmd.Stdout, binaries.cmd.Stderr = binaries.output, binaries.output
	if err := binaries.cmd.Start(); err != nil {
		return fmt.Errorf("build %v: %v", binaries.pkgs, err)
	}
	return nil
}

// waitBuild waits for the build that startBuild started and returns its
// error.
func waitBuild() error {
	binaries.waiting.Lock()
	defer binaries.waiting.Unlock()
	if !binaries.done {
		binaries.done = true
		if err := binaries.cmd.Wait(); err != nil {
			out, _ := os.ReadFile(binaries.output.Name())
			binaries.err = fmt.Errorf("build %v: %v\n%s", binaries.pkgs, err, out)
		}
		binaries.output.Close()
	}
	return binaries.err
}

// waitBuilt waits for TestMain's build of the binaries, and fails t if it
// failed.
func waitBuilt(t *testing.T) {
	t.Helper()
	if err := waitBuild(); err != nil {
		t.Fatal(err)
	}
}

// scriptTurns is the embedded script, for a fake server to play.
func scriptTurns(t *testing.T) []scripted.Turn {
	t.Helper()
	script, err := loadScript(defaultScript)
	if err != nil {
		t.Fatal(err)
	}
	return script.Turns
}
