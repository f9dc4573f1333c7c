//go:build !linux

package workspace

// readReplaced reads nothing here: only Linux hides paths from
// commands (see the Linux version).
func (w *Workspace) readReplaced(string, entryID) []entryID { return nil }

// writeReplaced writes nothing here (see readReplaced).
func (w *Workspace) writeReplaced(string, entryID, []entryID) {}
