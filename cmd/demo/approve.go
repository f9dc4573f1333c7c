package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"sync"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/approval"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// Values of -approve.
const (
	approveAll  = "all"
	approveAsk  = "ask"
	approveDeny = "deny"
)

// approvalFlags are -approve and -undo.
type approvalFlags struct {
	mode string
	undo bool
}

func (f *approvalFlags) register(fs *flag.FlagSet) {
	f.mode = approveAll
	fs.Func("approve", "what happens to irreversible tool calls (run_command): all runs them,\n"+
		"deny answers them as denied (the model goes on without), ask prompts on\n"+
		"the terminal for each: y runs it, n denies it, e edits its arguments (default all)",
		func(s string) error {
			switch s {
			case approveAll, approveAsk, approveDeny:
				f.mode = s
				return nil
			}
			return fmt.Errorf("want all, ask or deny, not %q", s)
		})
	fs.BoolVar(&f.undo, "undo", false,
		"after the run, restore the files write_file changed (created files are removed,\n"+
			"overwritten ones get their content back) and print what was restored;\n"+
			"what run_command did stays (it is irreversible)")
}

// check refuses combinations the demo does not support.
func (f *approvalFlags) check(team bool) error {
	if team && (f.mode != approveAll || f.undo) {
		return &usageError{err: errors.New("-approve and -undo are for a single agent, not with -team")}
	}
	return nil
}

// applyApproval gives the agent's options the approval policy and, with -undo,
// a write_file that records what it replaces.
func (d *driver) applyApproval(opts *agent.Options) error {
	switch d.cfg.approval.mode {
	case approveAsk:
		opts.Approval = &tools.ApprovalOptions{Policy: approval.Default()}
	case approveDeny:
		opts.Approval = &tools.ApprovalOptions{Policy: approval.DenyIrreversible()}
	}
	if !d.cfg.approval.undo {
		return nil
	}
	var store durability.Store = memstore.New(nil) // the journal lives as long as the run
	if d.sess != nil {
		store = d.sess.store // kept with the session
	}
	var err error
	// Named as the agent: its records stay apart from the agent's sessions
	// and from other agents' journals in the same store.
	if d.journal, err = workspace.NewJournal(d.ws, store, &workspace.JournalOptions{Name: opts.Name}); err != nil {
		return err
	}
	journaled, err := d.journal.Tools()
	if err != nil {
		return err
	}
	for i, t := range opts.Tools {
		for _, j := range journaled {
			if j.Name() == workspace.WriteFileToolName && t.Name() == workspace.WriteFileToolName {
				opts.Tools[i] = j
			}
		}
	}
	return nil
}

// demoStdin is where -approve ask reads the answers.
var (
	demoStdin  io.Reader = os.Stdin
	stdinOnce  sync.Once
	stdinLines *bufio.Reader
	// unread is a read of a line started by a readAnswer that ctx cut
	// short: the next readAnswer takes its line (only the driver's
	// goroutine asks).
	unread chan answerLine
)

type answerLine struct {
	line string
	err  error
}

// readAnswer reads the next line of the input, trimmed, or returns ctx's
// cause when ctx ends first (Ctrl-C at the prompt): the read goes on in a
// goroutine of its own, which ends with it.
func readAnswer(ctx context.Context) (string, error) {
	stdinOnce.Do(func() { stdinLines = bufio.NewReader(demoStdin) })
	if unread == nil {
		read := make(chan answerLine, 1)
		go func() {
			line, err := stdinLines.ReadString('\n')
			read <- answerLine{line, err}
		}()
		unread = read
	}
	select {
	case l := <-unread:
		unread = nil
		if l.err != nil && l.line == "" {
			return "", l.err
		}
		return strings.TrimSpace(l.line), nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// stream follows the conversation; with -approve ask it prompts for the
// calls it waits for and resumes it with the answers, until it ends.
func (d *driver) stream(ctx context.Context, a *agent.Agent, id string, msgs []models.Message) iter.Seq2[agent.Event, error] {
	if d.cfg.approval.mode != approveAsk {
		return a.Stream(ctx, id, msgs)
	}
	return func(yield func(agent.Event, error) bool) {
		seq := a.Stream(ctx, id, msgs)
		for {
			var waiting *agent.WaitingError
			for ev, err := range seq {
				if errors.As(err, &waiting) {
					break
				}
				if !yield(ev, err) {
					return
				}
			}
			if waiting == nil {
				return
			}
			decisions := d.ask(ctx, waiting)
			seq = a.ResumeStream(ctx, id, msgs, decisions...)
		}
	}
}

// ask prompts for each waiting call: y approves, n denies, e edits (the
// next line is the new arguments); the end of the input denies, and so
// does ctx's end (Ctrl-C at the prompt), after which the resumed run
// ends at once with ctx's error.
func (d *driver) ask(ctx context.Context, w *agent.WaitingError) []tools.ApprovalAnswer {
	d.tr.EndText()
	var out []tools.ApprovalAnswer
	for _, p := range w.Pending {
		why := ""
		if p.Reason != "" {
			why = " (" + p.Reason + ")"
		}
		for {
			d.tr.Note("approve", "%s %s %s%s — run it? [y]es / [n]o / [e]dit", p.Tool, p.ToolCallID, shown(p.Arguments), why)
			answer, err := readAnswer(ctx)
			if ctx.Err() != nil {
				d.tr.Note("approve", "interrupted: %s %s denied", p.Tool, p.ToolCallID)
				out = append(out, agent.Deny(p.ToolCallID, "interrupted"))
				break
			}
			if err != nil {
				d.tr.Note("approve", "no answer (input ended): %s %s denied", p.Tool, p.ToolCallID)
				out = append(out, agent.Deny(p.ToolCallID, "nobody answered"))
				break
			}
			switch strings.ToLower(answer) {
			case "y", "yes":
				out = append(out, agent.Approve(p.ToolCallID))
			case "n", "no":
				out = append(out, agent.Deny(p.ToolCallID, "denied at the terminal"))
			case "e", "edit":
				d.tr.Note("approve", "new arguments for %s, as JSON on one line:", p.Tool)
				args, err := readAnswer(ctx)
				if err != nil || !json.Valid([]byte(args)) {
					d.tr.Note("approve", "not JSON; asking again")
					continue
				}
				out = append(out, agent.Edit(p.ToolCallID, json.RawMessage(args)))
			default:
				d.tr.Note("approve", "answer y, n or e")
				continue
			}
			break
		}
		d.tr.Answered(p.ToolCallID)
	}
	return out
}

// undo restores what write_file changed in session id (-undo).
func (d *driver) undo(ctx context.Context, id string) error {
	if d.journal == nil {
		return nil
	}
	restored, err := d.journal.Undo(context.WithoutCancel(ctx), id, "")
	for _, r := range restored {
		if r.Removed {
			d.tr.Note("undo", "removed %s (created by %s)", r.Path, r.CallID)
		} else {
			d.tr.Note("undo", "restored %s as it was before %s", r.Path, r.CallID)
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("-undo: %w", err)
	case len(restored) == 0:
		d.tr.Note("undo", "nothing to undo: write_file changed no file")
	default:
		d.tr.Note("undo", "what run_command did stays: commands are irreversible")
	}
	return nil
}
