// Command polyweave-store inspects the bbolt store files of Polyweave's
// durability (package durability/boltstore) without changing them.
//
//	polyweave-store verify FILE
//
// reads FILE read-only (under a shared lock; a file that a running
// process holds is read from a consistent copy, and the report says so),
// checks every record's
// checksum, every actor's summary and the log, and prints what the store
// still holds, actor by actor, and what is damaged and where. Verify goes
// on past damage, so a damaged store's intact actors are listed too.
//
// Exit status: 0 when the store is intact, 1 when damage was found, 2 when
// the file cannot be read as a store at all or the arguments are wrong.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/polyweave/polyweave-go/durability/boltstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: polyweave-store verify [-timeout D] FILE

verify  checks a store file read-only and reports what it holds and what is damaged
`

// run runs the command and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for a store that has the file open before verifying a copy")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	r, err := boltstore.Verify(fs.Arg(0), &boltstore.Options{OpenTimeout: *timeout})
	if err != nil {
		fmt.Fprintf(stderr, "polyweave-store: %v\n", err)
		return 2
	}
	printReport(stdout, r)
	switch {
	case r.Unreadable != nil:
		return 2
	case !r.Intact():
		return 1
	}
	return 0
}

// printReport writes r as text.
func printReport(w io.Writer, r *boltstore.Report) {
	if r.Unreadable != nil {
		fmt.Fprintf(w, "%s: UNREADABLE: %v\n", r.Path, r.Unreadable)
		return
	}
	fmt.Fprintf(w, "%s: format %q\n", r.Path, r.Format)
	if r.Copy != "" {
		fmt.Fprintf(w, "note: %s\n", r.Copy)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "DAMAGED: %v\n", p)
	}
	fmt.Fprintf(w, "log: %d intact entries, %d records", r.LogEntries, r.LogRecords)
	if len(r.LogActors) > 0 {
		fmt.Fprintf(w, " for %d actors (not yet checkpointed; verify reads them from the log)", len(r.LogActors))
	}
	fmt.Fprintln(w)
	damaged := 0
	for _, a := range r.Actors {
		fmt.Fprintf(w, "actor %q:", a.Name)
		if a.Snapshots > 0 {
			fmt.Fprintf(w, " snapshot at %d", a.LastSnapshot)
			if a.Snapshots > 1 {
				fmt.Fprintf(w, " (%d kept)", a.Snapshots)
			}
			fmt.Fprint(w, ",")
		}
		switch a.Events {
		case 0:
			fmt.Fprint(w, " no events")
		case 1:
			fmt.Fprintf(w, " 1 event at %d", a.FirstEvent)
		default:
			fmt.Fprintf(w, " %d events %d..%d", a.Events, a.FirstEvent, a.LastEvent)
		}
		if len(a.Damaged) == 0 {
			fmt.Fprintln(w, ": intact")
			continue
		}
		damaged++
		fmt.Fprintln(w, ": DAMAGED")
		for _, err := range a.Damaged {
			fmt.Fprintf(w, "  %v\n", err)
		}
	}
	state := "intact"
	if !r.Intact() {
		state = "DAMAGED"
	}
	fmt.Fprintf(w, "%s: %d actors, %d damaged; %d problems outside actors\n", state, len(r.Actors), damaged, len(r.Problems))
}
