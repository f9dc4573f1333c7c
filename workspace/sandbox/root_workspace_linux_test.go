//go:build linux

package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// A sandbox around "/" would hide nothing around its workspace and let
// commands write everywhere the host may: it is refused, with
// ErrConfig and an error that says so, before any helper starts, with
// or without EtcLinkDirs (whose check would refuse it too, for the
// wrong reason: /etc in the workspace).
func TestLaunch_RootWorkspaceRefused(t *testing.T) {
	root, null := openRootAndNull(t, "/")
	cfg := defaults(t, Config{})
	saved := EtcLinkDirs
	t.Cleanup(func() { EtcLinkDirs = saved })
	for _, dirs := range [][]string{saved, nil} {
		EtcLinkDirs = dirs
		if _, err := Probe(cfg, root); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `workspace is "/"`) {
			t.Errorf("Probe of a workspace at / (EtcLinkDirs %q): %v; want it refused with ErrConfig as the workspace being /", dirs, err)
		}
		p, err := Prepare(cfg, root, null, null)
		if err == nil {
			p.Release()
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `workspace is "/"`) {
			t.Errorf("Prepare of a workspace at / (EtcLinkDirs %q): %v; want it refused with ErrConfig", dirs, err)
		}
	}
	// The directory is told by what it is, not by the name it was
	// opened by.
	other, _ := openRootAndNull(t, "/etc/..")
	if _, err := Probe(cfg, other); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `workspace is "/"`) {
		t.Errorf("Probe of /etc/..: %v; want it refused", err)
	}
}
