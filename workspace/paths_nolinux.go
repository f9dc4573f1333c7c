//go:build !linux

package workspace

import (
	"errors"
	"io/fs"
)

// sysCalls holds no system call here: the calls tests replace are
// Linux's (see paths_linux.go).
type sysCalls struct{}

// errNoLookupBeneath is the error of entryBeneath and namesBeneath
// here. They serve the comparison of a write's name with the paths
// hidden from commands, and only Linux has a sandbox that hides paths.
var errNoLookupBeneath = errors.New("no lookup beneath the root without following links on this system")

// entryBeneath fails here (see errNoLookupBeneath).
func (w *Workspace) entryBeneath(string) (entryID, error) { return entryID{}, errNoLookupBeneath }

// namesBeneath fails here (see errNoLookupBeneath).
func (w *Workspace) namesBeneath(string) ([]string, error) { return nil, errNoLookupBeneath }

// replaceBeneath leaves every write to replace's path through the root
// here: only Linux hides paths from commands (see the Linux version).
func (w *Workspace) replaceBeneath(string, fs.FileMode, bool, string, bool) (bool, *refusal) {
	return false, nil
}

// lockTempDirOf locks nothing here: only Linux hides paths from
// commands, so no write uses hiddenTempName (see the Linux version).
func (w *Workspace) lockTempDirOf(string) (func(), *refusal) { return func() {}, nil }
