package main

import (
	"context"
	"fmt"
	"io"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
)

// runSalvage salvages the store file at path into dst, prints what it did
// and returns the exit status.
func runSalvage(ctx context.Context, path, dst string, opts *boltstore.Options, stdout, stderr io.Writer) int {
	fs, err := boltstore.SalvageFile(ctx, path, dst, opts)
	if err != nil {
		fmt.Fprintf(stderr, "polyweave-store: %v\n", err)
		return exitFailed
	}
	r := fs.Report
	fmt.Fprintf(stdout, "%s: format %q\n", r.Path, r.Format)
	if r.Unchecked {
		fmt.Fprintf(stdout, "WARNING: records of format %q carry no checksums: they were copied, not checked; damage in them cannot be found\n", r.Format)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(stdout, "DAMAGED: %v\n", p)
	}
	if n := len(r.SetAside); n > 0 {
		fmt.Fprintf(stdout, "note: %d damaged bucket(s) set aside by an earlier salvage: left out of %s\n", n, dst)
	}
	for _, a := range fs.Actors {
		if a.SetAside {
			fmt.Fprintf(stdout, "actor %s: DAMAGED pages: its bucket set aside, left out of %s, because:\n", durability.QuoteName(a.Name), dst)
		} else {
			fmt.Fprintf(stdout, "actor %s: DAMAGED:\n", durability.QuoteName(a.Name))
		}
		for _, err := range a.Damage {
			fmt.Fprintf(stdout, "  %v\n", err)
		}
		fmt.Fprintf(stdout, "  kept: %s\n", kept(a.Kept))
	}
	salvaged := map[string]bool{}
	for _, a := range fs.Actors {
		salvaged[a.Name] = true
	}
	whole := 0
	for _, a := range fs.After.Actors {
		if !salvaged[a.Name] {
			whole++
			fmt.Fprintf(stdout, "actor %s: intact, copied whole\n", durability.QuoteName(a.Name))
		}
	}
	damaged := len(fs.Actors) > 0 || !r.Intact()
	switch {
	case damaged:
		fmt.Fprintf(stdout, "written to %s: %d actors salvaged, %d copied whole\n", dst, len(fs.Actors), whole)
	default:
		fmt.Fprintf(stdout, "nothing damaged found; written to %s: %d actors copied whole\n", dst, whole)
	}
	if !fs.After.Intact() {
		// Salvage keeps only what checks: this would be a defect.
		fmt.Fprintf(stdout, "WARNING: %s does not verify intact:\n", dst)
		printReport(stdout, fs.After)
		return exitDamaged
	}
	switch {
	case damaged:
		return exitDamaged
	case r.Unchecked:
		return exitUnchecked
	}
	return exitIntact
}

// kept says what Salvage kept of an actor.
func kept(k boltstore.Salvaged) string {
	s := "no snapshot, "
	if k.Snapshot {
		s = fmt.Sprintf("snapshot at %d, ", k.SnapshotIndex)
	}
	switch k.Events {
	case 0:
		s += "no events"
	case 1:
		s += fmt.Sprintf("1 event at %d", k.From)
	default:
		s += fmt.Sprintf("%d events %d..%d", k.Events, k.From, k.From+uint64(k.Events)-1)
	}
	return s + fmt.Sprintf("; dropped %d records", k.Dropped)
}
