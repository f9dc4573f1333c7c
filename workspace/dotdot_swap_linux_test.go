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

		var swapErr error
		stop := make(chan struct{})
		swapped := make(chan struct{})
		go func() {
			defer close(swapped)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// box is the directory, then the link out, in turn.
				if err := unix.Renameat2(unix.AT_FDCWD, in("box"), unix.AT_FDCWD, in("out-link"), unix.RENAME_EXCHANGE); err != nil {
					swapErr = err
					return
				}
			}
		}()
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
		close(stop)
		<-swapped
		mustDo(t, swapErr)
		if _, err := os.Lstat(filepath.Join(fx.outside, "planted.txt")); !os.IsNotExist(err) {
			t.Errorf("write_file inner-link/../planted.txt wrote outside the workspace (%v)", err)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.outside, "secret.txt")); string(b) != secretContent {
			t.Errorf("the file outside now holds %q", b)
		}
	})
}
