// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in a
// temporary folder, the server on a free loopback port, removed again by
// [Server.Stop]. It needs the server binaries of PostgreSQL; when they are
// missing it runs the project's scripts/postgres.sh, which installs Debian's
// postgresql package (as root, with apt-get).
//
// PostgreSQL refuses to run as root, so a root caller runs the server as the
// system user "postgres" (or, without one, "nobody") and hands the folder to
// that user.
//
// Setting POLYWEAVE_TEST_POSTGRES to a connection string makes [Start] use that
// server instead of starting one.
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

// EnvDSN names the environment variable that points the tests at an
// existing server instead of a throwaway one.
const EnvDSN = "POLYWEAVE_TEST_POSTGRES"

// Options configures [Start]. A nil *Options means defaults.
type Options struct {
	// Fsync keeps the server's fsync on. The default (off) is for tests,
	// where a power loss does not matter and fsync costs time on a shared
	// disk; benchmarks of durable writes set it.
	Fsync bool

	// StartTimeout bounds the wait for the server to accept connections.
	// Zero means 60 seconds.
	StartTimeout time.Duration

	// Settings are extra server settings (name → value), passed as -c.
	Settings map[string]string
}

// Server is a running throwaway server. Stop it with [Server.Stop].
type Server struct {
	// DSN connects to the database "postgres" as the superuser, over TCP
	// on the loopback interface, without a password.
	DSN string

	dir  string
	cmd  *exec.Cmd
	done chan error
}

// Start starts a server, or returns one for the connection string in
// POLYWEAVE_TEST_POSTGRES when that is set (Stop then does nothing).
func Start(opts *Options) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return &Server{DSN: dsn}, nil
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, owner, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "polyweave-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{dir: dir}
	if err := s.start(bin, cred, owner, o); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start(bin string, cred *syscall.Credential, owner *user.User, o Options) error {
	if cred != nil {
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: hand %s to user %s: %w", s.dir, owner.Username, err)
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = s.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}

	var lastErr error
	for range 5 { // the free port may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			return err
		}
		args := []string{"-D", data, "-k", s.dir, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
			"-c", "fsync=" + onOff(o.Fsync), "-c", "synchronous_commit=on",
			"-c", "full_page_writes=" + onOff(o.Fsync),
			"-c", "max_connections=200", "-c", "shared_buffers=64MB",
			"-c", "log_min_messages=fatal", "-c", "logging_collector=off"}
		for k, v := range o.Settings {
			args = append(args, "-c", k+"="+v)
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
		cmd.Dir = s.dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// The server dies with this process (immediate shutdown on SIGQUIT)
		// even when the test binary is killed before it can call Stop.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("pgtest: start postgres: %w", err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		s.cmd, s.done = cmd, done
		s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = waitReady(bin, port, s.dir, cred, done, o.StartTimeout)
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

// Stop shuts the server down (immediately: the data is thrown away) and
// removes its folder. It is idempotent.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.kill()
	s.cmd = nil
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("pgtest: remove %s: %w", s.dir, err)
	}
	return nil
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
