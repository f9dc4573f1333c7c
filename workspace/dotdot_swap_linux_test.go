package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A directory on the way to a ".." swapped for a link out of the
// workspace while the path is resolved and acted on: what is read or
// written is inside the workspace, or the call is refused; never the
// file outside.
func TestFileTools_DotDotWhileADirectoryIsSwappedForALinkOut(t *testing.T) {
	eachNaming(t, func(t *testing.T, byPath bool) {
		fx := newFixture(t, nil).naming(byPath)
		ctx := context.Background()
		in := func(name string) string { return filepath.Join(fx.root, name) }
		mustDo(t, os.MkdirAll(in("box/inner"), 0o755))
		writeFile(t, in("box/secret.txt"), "inside\n")
		mustDo(t, os.Symlink("../outside", in("out-link")))
		mustDo(t, os.Symlink("box/inner", in("inner-link")))

		stop := exchangeUntilStopped(t, in("box"), in("out-link")) // the directory, then the link out, in turn
		for range 300 {
			if t.Failed() {
				break
			}
			res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: "inner-link/../secret.txt"})
			if err != nil {
				t.Error(err)
			}
			if res.Success && res.Content != "inside\n" || strings.Contains(res.Content, secretContent) {
				t.Errorf("read_file inner-link/../secret.txt read %q", res.Content)
			}
			if strings.Contains(res.Error, fx.base) {
				t.Errorf("read_file inner-link/../secret.txt: %q names a host path", res.Error)
			}
			if _, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "inner-link/../planted.txt", Content: "planted\n"}); err != nil {
				t.Error(err)
			}
		}
		stop()
		fx.checkOutsideUntouched(t, "inner-link/../planted.txt")
	})
}

// exchangeUntilStopped exchanges the directory dir with each of others
// in turn (RENAME_EXCHANGE), over and over, until the returned stop is
// called; stop fails the test if an exchange failed.
func exchangeUntilStopped(t *testing.T, dir string, others ...string) (stop func()) {
	var swapErr error
	stopping := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for i := 0; ; i++ {
			select {
			case <-stopping:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, others[i%len(others)], unix.RENAME_EXCHANGE); err != nil {
				swapErr = err
				return
			}
		}
	}()
	return func() {
		close(stopping)
		<-swapped
		mustDo(t, swapErr)
	}
}

// checkOutsideUntouched fails the test when write_file of path, run
// while the workspace was attacked, wrote outside it, or when the file
// outside changed.
func (fx *fixture) checkOutsideUntouched(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(fx.outside, filepath.Base(path))); !os.IsNotExist(err) {
		t.Errorf("write_file %s wrote outside the workspace (%v)", path, err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.outside, "secret.txt")); string(b) != secretContent {
		t.Errorf("the file outside now holds %q", b)
	}
}
