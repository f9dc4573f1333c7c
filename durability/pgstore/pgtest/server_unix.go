//go:build unix

package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startServer makes the server's folder and starts a server in it.
func startServer(o Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, owner, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := serverDir(bin, cred, owner)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	if err := s.start(bin, cred, o); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// fallbackParent is where the server's folder is made when the server's
// user cannot reach TMPDIR.
var fallbackParent = "/tmp"

// serverDir makes the server's folder, under TMPDIR or else under
// fallbackParent, owned by the server's user (cred, nil for this process's
// own), and makes sure that user can enter it.
func serverDir(bin string, cred *syscall.Credential, owner *user.User) (string, error) {
	parents := []string{os.TempDir()}
	if cred != nil && filepath.Clean(fallbackParent) != filepath.Clean(parents[0]) {
		parents = append(parents, fallbackParent)
	}
	var blocked []string
	for _, parent := range parents {
		sweep(parent)
		dir, err := os.MkdirTemp(parent, "polyweave-pg-")
		if err != nil {
			return "", fmt.Errorf("pgtest: %w", err)
		}
		// Its owner, for the sweep of a later Start should this process
		// end without Stop (a test binary that panics, or is killed).
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("pgtest: %w", err)
		}
		if cred == nil {
			return dir, nil
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("pgtest: hand %s to user %s: %w", dir, owner.Username, err)
		}
		if canEnter(bin, cred, dir) {
			return dir, nil
		}
		os.RemoveAll(dir)
		blocked = append(blocked, describe(firstBlocked(bin, cred, parent)))
	}
	return "", fmt.Errorf("pgtest: PostgreSQL does not run as root, so it runs as user %s, which cannot enter %s; "+
		"set TMPDIR to a folder that user can reach, make that folder searchable by it (chmod o+x), "+
		"or set %s to a running server", owner.Username, strings.Join(blocked, ", nor "), EnvDSN)
}

// ownerFile, in a server's folder, holds the pid of the process that
// made it.
const ownerFile = "owner.pid"

// sweep removes the server folders in parent whose owners have exited
// without Stop and whose servers have exited too. A folder whose owner
// or server is alive, or not known (being made), is left alone.
func sweep(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "polyweave-pg-*"))
	for _, dir := range dirs {
		if alive(filepath.Join(dir, ownerFile)) || alive(filepath.Join(dir, "data", "postmaster.pid")) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, ownerFile)); err == nil {
			os.RemoveAll(dir)
		}
	}
}

// alive reports whether the process whose pid is the first line of file
// may be running: true unless file names one that has exited. A missing
// file names none.
func alive(file string) bool {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return true
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// canEnter says whether the user of cred can change into dir: it runs the
// server binary (for its version) as that user, in dir.
func canEnter(bin string, cred *syscall.Credential, dir string) bool {
	c := exec.Command(filepath.Join(bin, "postgres"), "--version")
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return c.Run() == nil
}

// firstBlocked returns the outermost folder of dir and its parents that
// the user of cred cannot enter (dir itself when it finds none).
func firstBlocked(bin string, cred *syscall.Credential, dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !canEnter(bin, cred, chain[i]) {
			return chain[i]
		}
	}
	return dir
}

// describe names dir with its mode and owner.
func describe(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return dir
	}
	owner := "?"
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = strconv.FormatUint(uint64(st.Uid), 10)
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
	}
	return fmt.Sprintf("%s (mode %04o, owner %s)", dir, fi.Mode().Perm(), owner)
}

func (s *Server) start(bin string, cred *syscall.Credential, o Options) error {
	data := filepath.Join(s.Dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = s.Dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}

	var lastErr error
	for range 5 { // the free port may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			return err
		}
		args := []string{"-D", data, "-k", s.Dir, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
			"-c", "fsync=" + onOff(o.Fsync), "-c", "synchronous_commit=on",
			"-c", "full_page_writes=" + onOff(o.Fsync),
			"-c", "max_connections=200", "-c", "shared_buffers=64MB",
			"-c", "log_min_messages=fatal", "-c", "logging_collector=off"}
		for k, v := range o.Settings {
			args = append(args, "-c", k+"="+v)
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
		cmd.Dir = s.Dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = serverProcAttr(cred)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("pgtest: start postgres: %w", err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		s.cmd, s.done = cmd, done
		s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = waitReady(bin, port, s.Dir, cred, done, o.StartTimeout)
		if err == nil {
			return nil
		}
		s.kill()
		lastErr = fmt.Errorf("pgtest: postgres did not start: %w\n%s", err, stderr.String())
		if !strings.Contains(stderr.String(), "could not bind") {
			break
		}
	}
	return lastErr
}

// waitReady polls pg_isready until the server accepts connections, it
// exits, or the timeout passes.
func waitReady(bin string, port int, sock string, cred *syscall.Credential, exited chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c := exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-d", "postgres")
		if c.Run() == nil {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err // kill reads it again
			return fmt.Errorf("server exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", timeout)
		}
	}
}

// kill asks for an immediate shutdown and waits for the server to exit,
// killing its process group if it takes more than ten seconds.
func (s *Server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// credential returns who runs the server: nil (this process's user) unless
// this process is root, then the system user postgres or nobody.
func credential() (*syscall.Credential, *user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, u, nil
	}
	return nil, nil, errors.New("pgtest: running as root and no unprivileged user (postgres or nobody) to run the server as")
}

// binDir finds the server binaries through scripts/postgres.sh, which
// installs them when they are missing.
func binDir() (string, error) {
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	c := exec.Command("bash", script, "bindir")
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("pgtest: %s bindir: %w: %s (run it by hand, as root, to install PostgreSQL)", script, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// scriptPath locates scripts/postgres.sh in the module this file belongs to.
func scriptPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("pgtest: cannot locate the module's scripts folder")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	p := filepath.Join(root, "scripts", "postgres.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("pgtest: %w (set POLYWEAVE_TEST_POSTGRES to use a running server)", err)
	}
	return p, nil
}
