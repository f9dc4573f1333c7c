//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
)

// Supported reports whether this build has a sandbox (Linux only).
const Supported = false

// errUnsupported is the reason there is no sandbox on this system.
var errUnsupported error = unsupportedError(errors.New("no sandbox on " + runtime.GOOS + ": it needs Linux namespaces and Landlock"))

// Process is a sandboxed command; there are none on this system.
type Process struct{ Cmd *exec.Cmd }

// Pid is not available on this system.
func (p *Process) Pid() int { return -1 }

// Terminate does nothing on this system.
func (p *Process) Terminate() {}

// Protections are none on this system.
func (p *Process) Protections() *Protections { return &Protections{} }

// Finish fails on this system.
func (p *Process) Finish() (Exit, error) { return Exit{Code: -1}, errUnsupported }

// Start fails on this system: there is no sandbox.
func Start(Config, *os.File, string, string, []string, *os.File, *os.File) (*Process, error) {
	return nil, errUnsupported
}

// Prepare fails on this system: there is no sandbox.
func Prepare(Config, *os.File, *os.File, *os.File) (*Process, error) { return nil, errUnsupported }

// PrepareContext fails on this system: there is no sandbox.
func PrepareContext(context.Context, Config, *os.File, *os.File, *os.File) (*Process, error) {
	return nil, errUnsupported
}

// Run fails on this system.
func (p *Process) Run(string, string, []string) error { return errUnsupported }

// RunContext fails on this system.
func (p *Process) RunContext(context.Context, string, string, []string) error { return errUnsupported }

// Release does nothing on this system.
func (p *Process) Release() {}

// Probe reports no sandbox on this system.
func Probe(Config, *os.File) (Protections, error) {
	return Protections{Missing: []string{errUnsupported.Error()}}, errUnsupported
}

// StatusFD is -1 on this system.
func (p *Process) StatusFD() int { return -1 }

// ReadStatus reports true on this system.
func (p *Process) ReadStatus() bool { return true }

// Exited reports false on this system.
func (p *Process) Exited() bool { return false }
