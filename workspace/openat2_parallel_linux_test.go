//go:build linux

package workspace

import (
	"testing"
)

// What a test makes openat2 answer (EAGAIN, in TestDirByName_EAGAIN)
// is its own workspace's: a workspace of another test, running in
// parallel, still resolves a ".." without being left to the root.
func TestDirByName_OtherWorkspaceUnaffected(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	for range 200 {
		if got, ok := fx.ws.dirByName("sub/../sub/."); !ok || got != "sub" {
			t.Fatalf("dirByName(sub/../sub/.) = %q, %v; want sub, found", got, ok)
		}
	}
}
