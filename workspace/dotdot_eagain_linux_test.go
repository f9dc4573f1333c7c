//go:build linux

package workspace

import (
	"testing"

	"golang.org/x/sys/unix"
)

// openat2 answers EAGAIN to a ".." under RESOLVE_BENEATH while a rename
// anywhere on the system races the walk. dirByName tries again a few
// times (maxOpenat2Tries in all), then leaves the path to the root,
// which resolves it as well, only slower: a system renaming without
// pause cannot keep checkPath spinning.
func TestDirByName_EAGAIN(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	const upTo = "sub/../sub/."
	want, rf := fx.ws.resolveDir(upTo)
	if rf != nil || want != "sub" {
		t.Fatalf("resolveDir(%q) = %q, %v", upTo, want, rf)
	}
	// eagain makes the first n calls of openat2 fail with EAGAIN and
	// counts the calls.
	eagain := func(n int) *int {
		calls := new(int)
		fx.ws.sys.openat2 = func(dirfd int, path string, how *unix.OpenHow) (int, error) {
			if *calls++; *calls <= n {
				return -1, unix.EAGAIN
			}
			return unix.Openat2(dirfd, path, how)
		}
		return calls
	}

	for k := 1; k < maxOpenat2Tries; k++ {
		calls := eagain(k)
		if got, ok := fx.ws.dirByName(upTo); !ok || got != want {
			t.Errorf("dirByName(%q) after %d EAGAINs = %q, %v; want %q found", upTo, k, got, ok, want)
		}
		if *calls != k+2 { // the k refused, then the path and its cleaned name
			t.Errorf("%d EAGAINs: openat2 called %d times, want %d", k, *calls, k+2)
		}
	}

	calls := eagain(1 << 20)
	if got, ok := fx.ws.dirByName(upTo); ok {
		t.Errorf("dirByName(%q) with openat2 answering EAGAIN each time = %q, found; want it left to the root", upTo, got)
	}
	if *calls != maxOpenat2Tries {
		t.Errorf("openat2 answering EAGAIN each time was called %d times, want %d", *calls, maxOpenat2Tries)
	}
	for _, p := range []string{upTo, upTo + "/a.txt", "sub/../notes.txt"} {
		eagain(1 << 20)
		got, rf := fx.ws.checkPath(p)
		fx.ws.sys.openat2 = nil
		wantName, wrf := fx.ws.checkPath(p)
		if rf != nil || wrf != nil || got != wantName {
			t.Errorf("checkPath(%q) with openat2 answering EAGAIN = %q, %v; without = %q, %v", p, got, rf, wantName, wrf)
		}
	}
}
