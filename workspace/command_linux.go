//go:build linux

package workspace

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// watchExit opens a pidfd on the started shell (or helper): it becomes
// readable when the process exits, and the drain loop polls it with the
// output pipes.
func (p *process) watchExit() error {
	fd, err := unix.PidfdOpen(p.cmd.Process.Pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open (Linux 5.3 or later is needed): %w", err)
	}
	p.pidfd = fd
	return nil
}

// wait reaps the shell (or helper).
func (p *process) wait() error { return p.cmd.Wait() }

// cloexecPipe returns a pipe whose ends are both close-on-exec.
func cloexecPipe() ([2]int, error) {
	var fds [2]int
	err := unix.Pipe2(fds[:], unix.O_CLOEXEC)
	return fds, err
}

// startDir is where unsandboxed commands start: the root directory the
// file tools use, by its descriptor, so a rename or a swapped symbolic
// link since New cannot send a command elsewhere. The child resolves it
// before exec, while the descriptor is still open.
func (w *Workspace) startDir() string {
	return "/proc/self/fd/" + strconv.Itoa(int(w.rootDir.Fd()))
}
