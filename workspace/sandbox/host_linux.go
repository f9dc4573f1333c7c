//go:build linux

package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Supported reports whether this build has a sandbox (Linux only).
const Supported = true

// Process is a sandboxed command started by [Start]: the helper, PID 1 of
// the command's namespaces, whose process group in the host is its pid.
type Process struct {
	Cmd    *exec.Cmd
	ctl    *os.File // write end of the control pipe
	status *os.File // read end of the report pipe
	prot   *Protections
}

// Pid is the helper's pid in the host; it leads its own process group
// there, and killing it kills every process of the command.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Terminate asks the helper to send SIGTERM to every process of the
// command. Kill (SIGKILL to the helper) is what makes sure.
func (p *Process) Terminate() {
	_, _ = p.ctl.Write([]byte{ctlTerminate})
}

// Protections are those the helper reported once set up.
func (p *Process) Protections() *Protections { return p.prot }

// Finish is called once the helper has exited (and before it is
// reaped): it returns how the command's shell ended, as the helper
// reported it, or an error saying the helper could not report (killed,
// or its set-up failed). It closes the pipes.
func (p *Process) Finish() (Exit, error) {
	defer p.ctl.Close()
	defer p.status.Close()
	var last report
	sc := bufio.NewScanner(p.status)
	for sc.Scan() {
		var r report
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			last = r
		}
	}
	switch {
	case last.Phase == "exit" && last.Exit != nil:
		return *last.Exit, nil
	case last.Phase == "error":
		return Exit{Code: -1}, fmt.Errorf("sandbox: %s", last.Error)
	}
	return Exit{Code: -1}, errors.New("sandbox helper was killed before the command's shell exited")
}

// Start starts command with shell -c in a new sandbox rooted at the
// workspace directory root (the open directory the file tools use), with
// env as its whole environment and stdout/stderr as its output. It
// returns once the sandbox is set up and the command started, or with
// the set-up's error. cfg must have its defaults filled in.
func Start(cfg Config, root *os.File, shell, command string, env []string, stdout, stderr *os.File) (*Process, error) {
	p, err := launch(request{Shell: shell, Command: command, Env: env, Config: cfg}, root, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Probe sets up a sandbox as Start would, without running anything, and
// says which protections it got. The error says why there is no sandbox
// at all.
func Probe(cfg Config, root *os.File) (Protections, error) {
	p, err := launch(request{Probe: true, Config: cfg}, root, nil, nil)
	if err != nil {
		return Protections{Missing: []string{err.Error()}}, err
	}
	_ = p.Cmd.Wait()
	p.ctl.Close()
	p.status.Close()
	return *p.prot, nil
}

// launch starts the helper and waits for its first report.
func launch(req request, root *os.File, stdout, stderr *os.File) (*Process, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox control pipe: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("sandbox status pipe: %w", err)
	}
	flags := syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if !req.Config.AllowNetwork {
		flags |= syscall.CLONE_NEWNET
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{helperArg0},
		Env:        []string{helperEnv},
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{ctlR, root, stW},
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:      true,
			Pdeathsig:   syscall.SIGKILL,
			Cloneflags:  uintptr(flags),
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		},
	}
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, fmt.Errorf("sandbox: start the helper with new namespaces: %w", err)
	}
	p := &Process{Cmd: cmd, ctl: ctlW, status: stR}
	fail := func(err error) (*Process, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		ctlW.Close()
		stR.Close()
		return nil, err
	}
	line, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if _, err := ctlW.Write(append(line, '\n')); err != nil {
		return fail(fmt.Errorf("sandbox: send the request: %w", err))
	}
	// The first report says the sandbox is ready, or why it is not.
	first, err := readLine(stR)
	if err != nil {
		return fail(fmt.Errorf("sandbox helper exited before it was set up (%v)", err))
	}
	var r report
	if err := json.Unmarshal(first, &r); err != nil {
		return fail(fmt.Errorf("sandbox helper: bad report %q", first))
	}
	if r.Phase != "ready" {
		return fail(fmt.Errorf("sandbox set-up failed: %s", r.Error))
	}
	p.prot = r.Protections
	return p, nil
}

// readLine reads one line byte by byte, so that nothing after it is
// consumed from the pipe.
func readLine(f *os.File) ([]byte, error) {
	var line []byte
	var b [1]byte
	for {
		n, err := f.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				return line, nil
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			return nil, err
		}
	}
}
