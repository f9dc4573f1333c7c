// Command polyweave-store inspects and recovers the bbolt store files of
// Polyweave's durability (package durability/boltstore); it never changes
// the file it is given.
//
//	polyweave-store verify [-timeout D] FILE
//
// reads FILE read-only (under a shared lock; a file that a running
// process holds, still held after a wait of at most 2 s, is read from a
// consistent copy, and the report says so), checks every record's
// checksum, every actor's summary and the log, and prints what the store
// serves, actor by actor (its bucket with the log's writes not yet
// checkpointed on top), and what is damaged and where. Verify goes on
// past damage, so a damaged store's intact actors are listed too, and an
// actor whose pages in the file are broken is named with what of it can
// still be read.
//
// A file of format "1" or "2", written before records had checksums, can
// be read but not checked: verify says so and does not call it intact.
//
//	polyweave-store salvage [-timeout D] FILE NEWFILE
//
// recovers what is intact of FILE into a new store file NEWFILE, which
// must not exist (see boltstore.SalvageFile): it copies FILE (which no
// running process may hold), salvages each damaged actor of the copy (it
// keeps the actor's newest intact snapshot and the intact events that
// follow it without a gap, and drops the rest; an actor whose pages are
// broken has its bucket set aside and left out of NEWFILE), compacts it
// and puts it at NEWFILE. It prints, for each damaged actor, why and what
// was kept. FILE is never changed, and nothing is left at NEWFILE when
// salvage fails. The store that used FILE can then be pointed at NEWFILE.
// NEWFILE has FILE's permission bits and is owned by the user who ran
// salvage: run it as the store's user, or give NEWFILE to that user.
//
// -timeout D (default 1m) bounds the whole command: the wait for a
// running store that holds FILE (at most 2 s, or half of D if that is
// shorter), the copy, the verification or the salvage. A command that
// runs out of time, or is interrupted (Ctrl-C, SIGTERM, SIGHUP), stops
// with exit status 2 and leaves no copy behind.
//
// -h (or -help) prints the usage, to stdout, and exits 0; so does a
// subcommand's -h, which prints the subcommand's usage line and flags.
// Wrong arguments print the usage to stderr and exit 2.
//
// Exit status of verify: 0 when the store is intact, 1 when damage was
// found, 2 when the file cannot be read as a store at all (it does not
// exist, is not a regular file, is not a store, is damaged where the
// whole file depends on it) or the arguments are wrong, 3 when nothing
// damaged was found but the records could not be checked (a format
// without checksums). Of salvage: 0 when nothing damaged was found
// (NEWFILE holds all of FILE), 1 when damage was found and what is intact
// was salvaged into NEWFILE, 2 when nothing was salvaged (FILE cannot be
// read as a store, or is damaged where the whole file depends on it, or
// is held by a running process; NEWFILE exists; wrong arguments), 3 when
// nothing damaged was found but the records could not be checked.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
)

func main() {
	ctx, stop := stopContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stopContext returns a context that ends when the command is asked to
// stop (Ctrl-C; SIGTERM, from kill or timeout(1); SIGHUP, its terminal
// closed), so that it stops and removes what it wrote.
func stopContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

const usage = `usage: polyweave-store verify [-timeout D] FILE
       polyweave-store salvage [-timeout D] FILE NEWFILE

verify   checks a store file read-only and reports what it holds and what is damaged
salvage  recovers what is intact of a damaged store file into NEWFILE, which must not
         exist; FILE is not changed
         -timeout D  the most the command takes (default 1m; must be positive): it waits
                     at most 2s (or D/2) for a running store that holds FILE (verify
                     then verifies a consistent copy of it; salvage refuses it)

exit status: 0 intact; 1 damage found (salvage: and what is intact salvaged);
             2 not readable as a store, nothing salvaged, or bad arguments;
             3 nothing damaged found, but the format's records carry no checksums (not checked)
`

// Exit statuses.
const (
	exitIntact    = 0
	exitDamaged   = 1
	exitFailed    = 2
	exitUnchecked = 3
)

// Defaults of verify's -timeout, and the longest wait for the lock on a
// held file within it.
const (
	defaultTimeout = time.Minute
	maxLockWait    = 2 * time.Second
)

// run runs the command until ctx is done and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" && args[0] != "salvage" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return exitFailed
	}
	cmd, files := args[0], 1
	if cmd == "salvage" {
		files = 2
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // the usage is printed below, where help asked for goes to stdout
	timeout := fs.Duration("timeout", defaultTimeout, "the most the command takes (positive): it waits at most 2s (or half of it) for a running store that holds the file")
	if err := fs.Parse(args[1:]); err != nil {
		// Help asked for is not an error: stdout, exit 0, as the
		// command's own -h and as flag.ExitOnError does; a wrong flag is
		// (flag printed why on stderr).
		w, code := stderr, exitFailed
		if errors.Is(err, flag.ErrHelp) {
			w, code = stdout, exitIntact
		}
		operands := " FILE"
		if cmd == "salvage" {
			operands += " NEWFILE"
		}
		fmt.Fprintf(w, "usage: polyweave-store %s [-timeout D]%s\n", cmd, operands)
		fs.SetOutput(w)
		fs.PrintDefaults()
		return code
	}
	if fs.NArg() != files {
		fmt.Fprint(stderr, usage)
		return exitFailed
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "polyweave-store: -timeout %v: must be positive (the most the command takes)\n", *timeout)
		return exitFailed
	}
	ctx, cancel := context.WithTimeoutCause(ctx, *timeout, fmt.Errorf("-timeout %v passed (a longer -timeout gives it more time)", *timeout))
	defer cancel()
	opts := &boltstore.Options{OpenTimeout: min(maxLockWait, *timeout/2)}
	if cmd == "salvage" {
		return runSalvage(ctx, fs.Arg(0), fs.Arg(1), opts, stdout, stderr)
	}
	r, err := boltstore.VerifyContext(ctx, fs.Arg(0), opts)
	if err != nil {
		fmt.Fprintf(stderr, "polyweave-store: %v\n", err)
		return exitFailed
	}
	printReport(stdout, r)
	switch {
	case r.Unreadable != nil:
		return exitFailed
	case !r.Intact():
		return exitDamaged
	case r.Unchecked:
		return exitUnchecked
	}
	return exitIntact
}

// printReport writes r as text.
func printReport(w io.Writer, r *boltstore.Report) {
	if r.Unreadable != nil {
		fmt.Fprintf(w, "%s: UNREADABLE: %v\n", r.Path, r.Unreadable)
		return
	}
	fmt.Fprintf(w, "%s: format %q\n", r.Path, r.Format)
	if r.Unchecked {
		fmt.Fprintf(w, "WARNING: records of format %q carry no checksums: they were read, not checked; damage in them cannot be found\n", r.Format)
	}
	if r.Copy != "" {
		fmt.Fprintf(w, "note: %s\n", r.Copy)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "DAMAGED: %v\n", p)
	}
	if n := len(r.SetAside); n > 0 {
		fmt.Fprintf(w, "note: %d damaged bucket(s) set aside by an earlier salvage: kept in the file unread, not served, dropped by compaction\n", n)
	}
	if r.Unchecked {
		fmt.Fprintf(w, "log: %d entries, %d records (not checked)", r.LogEntries, r.LogRecords)
	} else {
		fmt.Fprintf(w, "log: %d intact entries, %d records", r.LogEntries, r.LogRecords)
	}
	if len(r.LogActors) > 0 {
		fmt.Fprintf(w, " for %d actors (not yet checkpointed; counted in the actors below)", len(r.LogActors))
	}
	if r.LogUnreplayed {
		fmt.Fprint(w, "; the log cannot be replayed as a whole, the actors below are as their buckets hold them")
	}
	fmt.Fprintln(w)
	state := "intact"
	if r.Unchecked {
		state = "not checked (no checksums)"
	}
	damaged := 0
	for _, a := range r.Actors {
		fmt.Fprintf(w, "actor %s:", durability.QuoteName(a.Name))
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
		if a.Logged > 0 {
			fmt.Fprintf(w, " (%d from the log)", a.Logged)
		}
		if len(a.Damaged) == 0 {
			fmt.Fprintf(w, ": %s\n", state)
			continue
		}
		damaged++
		if a.Pages {
			fmt.Fprintln(w, " readable: DAMAGED pages; the store refuses this actor until it is salvaged, which keeps what is readable and intact")
		} else {
			fmt.Fprintln(w, ": DAMAGED")
		}
		for _, err := range a.Damaged {
			fmt.Fprintf(w, "  %v\n", err)
		}
	}
	switch {
	case !r.Intact():
		state = "DAMAGED"
	case r.Unchecked:
		state = "NOT CHECKED"
	}
	fmt.Fprintf(w, "%s: %d actors, %d damaged; %d problems outside actors\n", state, len(r.Actors), damaged, len(r.Problems))
}
