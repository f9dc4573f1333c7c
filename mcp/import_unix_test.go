//go:build unix

package mcp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// A failed Import stops the server it started at once: a server that
// never answers initialize is gone (killed and reaped) when Import
// returns, not some seconds later.
func TestImport_FailedImportStopsItsServer(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	_, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{
		Command:        []string{"sh", "-c", `echo $$ > "$0"; exec sleep 100`, pidFile},
		ConnectTimeout: time.Second})
	if err == nil {
		t.Fatal("the import of a silent server succeeded")
	}
	raw, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatalf("the server did not start: %v (import: %v)", rerr, err)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(raw)))
	if perr != nil {
		t.Fatal(perr)
	}
	// Signal 0 finds a process that runs or is a zombie not yet reaped.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server process %d still there when Import returned: kill 0: %v", pid, err)
	}
}
