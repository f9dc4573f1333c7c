// Package sandboxhook holds test hooks of package sandbox that the tests
// of package workspace set too: a run_command test reaches a point
// inside the sandbox's start through them, with real processes on both
// sides. They are nil outside tests; a test sets one before the call it
// watches and clears it after (they are read without locking).
package sandboxhook

import "context"

// Checked, when set by tests, is called by the sandbox's
// Process.RunContext once the helper has answered that it starts the
// command (it forks the command's shell right after saying so), before
// RunContext looks whether ctx, its context, ended meanwhile; with the
// helper's pid in the host.
var Checked func(ctx context.Context, helperPid int)
