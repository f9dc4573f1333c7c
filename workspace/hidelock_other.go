//go:build !linux

package workspace

// tryLockHideShared locks nothing here: only Linux hides paths from
// commands (see the Linux version).
func (w *Workspace) tryLockHideShared() bool { return true }

// lockHideExclusive locks nothing here (see tryLockHideShared).
func (w *Workspace) lockHideExclusive() *refusal { return nil }

// unlockHide unlocks nothing here (see tryLockHideShared).
func (w *Workspace) unlockHide() {}
