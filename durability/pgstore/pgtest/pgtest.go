// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in a
// temporary folder, the server on a free loopback port, removed again by
// [Server.Stop] (or, when the process that made it ended without Stop, by
// a later [Start], once its server has exited too). It needs the server binaries of PostgreSQL; when they are
// missing it runs the project's scripts/postgres.sh, which installs Debian's
// postgresql package (as root, with apt-get).
//
// PostgreSQL refuses to run as root, so a root caller runs the server as the
// system user "postgres" (or, without one, "nobody") and hands the folder to
// that user. That user must be able to reach the folder: when it cannot
// enter TMPDIR or one of its parents (a TMPDIR of mode 0700 owned by root,
// say), the folder is made under /tmp instead, and when it cannot reach
// that either, Start fails naming the folder in its way.
//
// Setting POLYWEAVE_TEST_POSTGRES to a connection string makes [Start] use that
// server instead of starting one. That is the only way on a system other
// than Unix, where Start cannot start a server and says so.
package pgtest

import (
	"fmt"
	"os"
	"os/exec"
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

	// Dir is the server's folder (its data and its socket), removed by
	// Stop; empty for a server named by POLYWEAVE_TEST_POSTGRES.
	Dir string

	cmd  *exec.Cmd
	done chan error
}

// Start starts a server, or returns one for the connection string in
// POLYWEAVE_TEST_POSTGRES when that is set (Stop then does nothing).
// Starting a server needs a Unix system; elsewhere Start fails unless
// POLYWEAVE_TEST_POSTGRES is set.
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
	return startServer(o)
}

// Stop shuts the server down (immediately: the data is thrown away) and
// removes its folder. It is idempotent.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.kill()
	s.cmd = nil
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("pgtest: remove %s: %w", s.Dir, err)
	}
	return nil
}
