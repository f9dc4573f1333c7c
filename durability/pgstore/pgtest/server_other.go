//go:build !unix

package pgtest

import (
	"errors"
	"runtime"
)

// startServer fails: the server runs as an unprivileged Unix user in a
// process group of its own, which this system does not have.
func startServer(Options) (*Server, error) {
	return nil, errors.New("pgtest: starting a PostgreSQL server needs a Unix system, not " + runtime.GOOS +
		"; set " + EnvDSN + " to the connection string of a running server")
}

// kill does nothing: no server is started on this system.
func (s *Server) kill() {}
