//go:build !linux

package workspace

// lockHideShared locks nothing here: only Linux hides paths from
// commands (see the Linux version).
func (w *Workspace) lockHideShared() {}

// lockHideExclusive locks nothing here (see lockHideShared).
func (w *Workspace) lockHideExclusive() *refusal { return nil }

// unlockHide unlocks nothing here (see lockHideShared).
func (w *Workspace) unlockHide() {}
