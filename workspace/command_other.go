//go:build unix && !linux

package workspace

import (
	"golang.org/x/sys/unix"
)

// watchExit starts a goroutine that waits for the shell and then closes
// the write end of a pipe whose read end the drain loop polls. Unlike
// Linux's pidfd this reaps the shell before its group is killed, so in
// principle the group id could be reused by then.
func (p *process) watchExit() error {
	fds, err := cloexecPipe()
	if err != nil {
		return err
	}
	p.pidfd = fds[0]
	p.waited = make(chan error, 1)
	go func() {
		p.waited <- p.cmd.Wait()
		unix.Close(fds[1])
	}()
	return nil
}

// wait returns the result of the Wait started by watchExit.
func (p *process) wait() error {
	if p.waited == nil {
		return p.cmd.Wait()
	}
	return <-p.waited
}

// cloexecPipe returns a pipe whose ends are both close-on-exec.
func cloexecPipe() ([2]int, error) {
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}

// startDir is the workspace directory as New resolved it.
func (w *Workspace) startDir() string { return w.dir }
