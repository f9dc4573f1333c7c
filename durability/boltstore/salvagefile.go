package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/durability"
)

// FileSalvage is what [SalvageFile] did.
type FileSalvage struct {
	// Report is what Verify found in the file (as the copy salvaged
	// shows it): the damage outside actors is in its Problems.
	Report *Report

	// Actors lists the actors salvaged, by name: those found damaged.
	// The other actors of the file were copied whole.
	Actors []ActorSalvage

	// After is what Verify found in the new file.
	After *Report
}

// ActorSalvage is what [SalvageFile] did to one damaged actor.
type ActorSalvage struct {
	Name string
	Kept Salvaged // what Salvage kept of it, and how many records it dropped

	// SetAside says that the actor's own pages in the file were broken:
	// its bucket was set aside, unread, and left out of the new file; what
	// was kept was read from its intact pages.
	SetAside bool

	// Damage is why: the damage found in the actor (its records, its
	// pages, its writes in the log).
	Damage []error
}

// SalvageFile recovers what is intact of the store file at path into a
// new store file at dst, which must not exist; the file at path is never
// changed. It takes the file's lock, shared, (waiting up to
// opts.OpenTimeout; a file a running store holds is refused: stop it
// first), copies it next to dst, verifies the copy (see [Verify]), opens
// it (reading it from its older meta page if the newest is damaged, and
// giving it a freelist that lists no page free if its own cannot be
// used: nothing of it is then reused), salvages every actor found damaged
// (see [Store.Salvage]), compacts it (which drops the buckets set aside
// and the pages nothing uses) and links it at dst. opts may be nil; only
// OpenTimeout, NoSync and Logger are used.
//
// The file at dst has the permission bits of the file at path (not the
// umask's, nor opts.FileMode), and is owned by the user and group that
// run SalvageFile, as any file it creates: salvaged by the user the
// store runs as, the store can open it; salvaged by another (root), dst
// must be given to that user (chown) before the store opens it.
//
// ctx bounds the whole: when it is done, SalvageFile stops, removes what
// it wrote and returns an error wrapping ctx's error and its cause
// (context.Cause). The error is for a
// salvage that could not be done (path is not a store, is damaged where
// the whole file depends on it, dst exists, the sync of dst's folder
// failed); nothing is then left at dst (unless, its folder not synced,
// dst could not be removed either: the error then says it is there).
func SalvageFile(ctx context.Context, path, dst string, opts *Options) (*FileSalvage, error) {
	var o Options
	if opts != nil {
		o.OpenTimeout, o.NoSync, o.Logger = opts.OpenTimeout, opts.NoSync, opts.Logger
	}
	if o.OpenTimeout < 0 {
		return nil, fmt.Errorf("salvage %s: negative OpenTimeout %v (zero means DefaultOpenTimeout)", path, o.OpenTimeout)
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		o.OpenTimeout = max(min(o.OpenTimeout, time.Until(deadline)), time.Nanosecond)
	}
	var tmp string // the copy, once made
	fail := func(err error) (*FileSalvage, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("stopped: %w", stopCause(ctx))
		}
		if msg := err.Error(); tmp != "" && strings.Contains(msg, tmp) {
			// The copy's name means nothing to the caller: it is to be
			// the new file.
			err = &renamed{strings.ReplaceAll(msg, tmp, dst), err}
		}
		return nil, fmt.Errorf("salvage %s into %s: %w", path, dst, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := notRegular(path, fi); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("salvage %s: %s exists: the new file must not (salvage never writes over a file)", path, dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("salvage %s: %w", path, err)
	}
	if dir := filepath.Dir(dst); !isDir(dir) {
		return nil, fmt.Errorf("salvage %s: cannot create %s: the folder %s does not exist", path, dst, dir)
	}
	tmp, err = copyLocked(ctx, path, dst, &o)
	if err != nil {
		return fail(err)
	}
	done := false
	defer func() {
		if !done {
			os.Remove(tmp)
		}
	}()

	ro := Options{ReadOnly: true, MetaFallback: true, OpenTimeout: o.OpenTimeout, FileMode: DefaultFileMode}
	r, err := verifyFile(ctx, tmp, path, &ro, os.OpenFile)
	if err != nil {
		return fail(err)
	}
	if r.Unreadable != nil {
		return fail(fmt.Errorf("cannot salvage: %w", r.Unreadable))
	}
	out := &FileSalvage{Report: r}
	s, err := open(ctx, tmp, &Options{NoSync: o.NoSync, Logger: o.Logger, MetaFallback: true, OpenTimeout: o.OpenTimeout, freeNothing: true}, nil)
	if err != nil {
		// The copy's name means nothing to the caller: name the file.
		return fail(fmt.Errorf("cannot salvage: %w", &renamed{strings.ReplaceAll(err.Error(), tmp, path), err}))
	}
	err = salvageAll(ctx, s, r, out)
	if err == nil {
		_, err = s.Compact(ctx)
	}
	if err := errors.Join(err, s.Close()); err != nil {
		return fail(err)
	}
	// The copy was the runner's alone while written; the new file gets
	// the file's permission bits, neither more open nor more closed.
	if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
		return fail(err)
	}
	if out.After, err = verifyFile(ctx, tmp, dst, &ro, os.OpenFile); err != nil {
		return fail(err)
	}
	if err := os.Link(tmp, dst); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		if errors.Is(err, fs.ErrExist) {
			return fail(fmt.Errorf("%s exists, created while salvage ran; it is left as it is (salvage never writes over a file): %w", dst, err))
		}
		return fail(fmt.Errorf("cannot link the new file at %s: %w", dst, err))
	}
	done = true
	os.Remove(tmp)
	if !o.NoSync {
		if err := syncDir(salvageOpenFile, filepath.Dir(dst)); err != nil {
			// A new file a crash may lose is not a salvage done: remove it,
			// as any failure does (the file is unchanged; salvage again).
			if rerr := os.Remove(dst); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, fmt.Errorf("salvage %s into %s: syncing its folder failed, so a crash may lose it: %w; removing it failed too (%v): it is complete and verified, and is left there", path, dst, err, rerr)
			}
			return fail(fmt.Errorf("syncing the new file's folder failed, so a crash could lose it: it was removed: %w", err))
		}
	}
	return out, nil
}

// salvageOpenFile opens the new file's folder to sync it (tests make it
// fail).
var salvageOpenFile = os.OpenFile

// renamed is err with another text.
type renamed struct {
	msg string
	err error
}

func (e *renamed) Error() string { return e.msg }
func (e *renamed) Unwrap() error { return e.err }

// copyLocked copies the store file at path, under its shared lock, into a
// new file next to dst, synced, and returns the copy's name.
func copyLocked(ctx context.Context, path, dst string, o *Options) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := regularFile(f, path); err != nil {
		return "", err
	}
	if err := lockFile(ctx, f, path, true, o.OpenTimeout); err != nil {
		if errors.Is(err, durability.ErrLocked) {
			return "", fmt.Errorf("%w: stop the process that uses it, then salvage it", err)
		}
		return "", err
	}
	tmp := fmt.Sprintf("%s.salvaging-%d-%d", dst, os.Getpid(), time.Now().UnixNano())
	c, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, DefaultFileMode)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("cannot create the copy that becomes %s, next to it: %w", dst, err)
	}
	err = copyFile(ctx, c, f)
	if err == nil && !o.NoSync {
		err = c.Sync()
	}
	if err := errors.Join(err, c.Close()); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// salvageAll salvages in s every actor r found damaged, and every actor
// s quarantined, and records them in out.
func salvageAll(ctx context.Context, s *Store, r *Report, out *FileSalvage) error {
	damage := map[string][]error{}
	pages := map[string]bool{}
	for _, a := range r.Actors {
		if len(a.Damaged) > 0 {
			damage[a.Name] = append(damage[a.Name], a.Damaged...)
			pages[a.Name] = a.Pages
		}
	}
	for _, p := range r.Problems { // the log's damaged writes name their actor
		var se *durability.StoreError
		if errors.As(p, &se) && se.Name != "" {
			damage[se.Name] = append(damage[se.Name], p)
		}
	}
	s.viewMu.RLock()
	for name, q := range s.quarantine {
		if _, ok := damage[name]; !ok {
			damage[name] = []error{q.err}
		}
		pages[name] = pages[name] || q.pages != nil
	}
	s.viewMu.RUnlock()
	for _, name := range slices.Sorted(maps.Keys(damage)) {
		kept, err := s.Salvage(ctx, name)
		if err != nil {
			return err
		}
		out.Actors = append(out.Actors, ActorSalvage{Name: name, Kept: kept, SetAside: pages[name], Damage: damage[name]})
	}
	return nil
}
