package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/polyweave/polyweave-go/tools"
)

// Tools returns ts with handlers that the inspector can stall, when
// Options.Faults is set (without it, ts as they are): a stalled tool's
// calls wait, without running, until the stall is lifted (then they run)
// or their context ends (the tool's timeout, a CANCEL or ABORT: the call
// gets its error result as usual). Unstalled, a handler runs as before,
// after one uncontended lock.
//
// The tools' names are the host's: each keeps a row of figures of its
// own, however many other names the model's calls make up (see
// [OtherTools]). A host giving ever new tools is bounded too: past 1024
// names given, those with no row (given without Faults and not called
// since, or whose row went past [MaxToolRows]) are forgotten, and a
// call of one is then counted as a name the model made up.
func (in *Inspector) Tools(ts []*tools.Tool) ([]*tools.Tool, error) {
	in.mu.Lock()
	if len(in.registered)+len(ts) > maxRegistered {
		in.forgetRegistered()
	}
	for _, t := range ts {
		in.register(clip(t.Name(), in.opts.Clip))
	}
	in.mu.Unlock()
	if !in.opts.Faults {
		return ts, nil
	}
	out := make([]*tools.Tool, len(ts))
	for i, t := range ts {
		def := t.Definition()
		name := def.Name
		in.mu.Lock()
		st := in.listStall(name, nil)
		in.mu.Unlock()
		var cur atomic.Pointer[stall]
		cur.Store(st)
		handler := def.Handler
		def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
			in.approvedRun(ctx)
			st := cur.Load()
			if st.dropped.Load() {
				// Its row went (see dropToolRow): the tool is back.
				in.mu.Lock()
				st = in.listStall(name, st)
				in.mu.Unlock()
				cur.Store(st)
			}
			if err := st.wait(ctx); err != nil {
				return nil, err
			}
			return handler(ctx, args)
		}
		var err error
		if out[i], err = tools.New(def); err != nil {
			return nil, fmt.Errorf("inspect: tool %s: %w", def.Name, err)
		}
	}
	return out, nil
}

// listStall returns the stall switch of the tool name, listing it with a
// row of figures: the one listed (another agent's copy of the same tool,
// or a tool whose name clips alike: one switch), or else st (nil: a new
// one); in.mu must be held. Switches are keyed as rows are, by the name
// clipped to Options.Clip: the switch goes with the row, unless stalled
// (see dropToolRow), and the tool's next call lists it again.
func (in *Inspector) listStall(name string, st *stall) *stall {
	key := clip(name, in.opts.Clip)
	if prev := in.stalls[key]; prev != nil {
		return prev
	}
	if st == nil {
		st = &stall{}
	}
	st.dropped.Store(false)
	in.stalls[key] = st
	in.register(key)
	in.toolStats(name)
	return st
}

// register lists the tool name (clipped) as the host's: a row of it
// made before (a call of it seen first, or a breaker change) is no
// longer counted among the names the model made up. in.mu must be held.
func (in *Inspector) register(name string) {
	in.registered[name] = true
	if st := in.tools[name]; st != nil && st.other {
		st.other = false
		in.unregistered--
	}
}

// stall is the switch of one tool.
type stall struct {
	// dropped is set when the switch went with its tool's row.
	dropped atomic.Bool
	mu      sync.Mutex
	on      bool
	release chan struct{} // closed when the stall is lifted
	waiting int
}

func (s *stall) wait(ctx context.Context) error {
	s.mu.Lock()
	if !s.on {
		s.mu.Unlock()
		return nil
	}
	release := s.release
	s.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stalled by the inspector: %w", context.Cause(ctx))
	}
}

func (s *stall) set(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && !s.on:
		s.release = make(chan struct{})
	case !on && s.on:
		close(s.release)
	}
	s.on = on
}

func (s *stall) state() (on bool, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.on, s.waiting
}

// busy reports whether the tool is stalled or calls wait at its switch.
func (s *stall) busy() bool {
	on, waiting := s.state()
	return on || waiting > 0
}

// maxRegistered is how many names of tools given to Tools are kept
// before those without a row of figures or a switch are forgotten (see
// forgetRegistered).
const maxRegistered = 1024

// forgetRegistered forgets the names given to Tools that have neither a
// row of figures nor a stall switch (given without Options.Faults, and
// not called since, or their row dropped): without it, a host giving
// ever new tools without Faults kept every name it gave. A name
// forgotten is counted, at its next call, as one the model made up
// (see OtherTools). Kept rows and switches are at most MaxToolRows and
// the tools stalled, so a sweep frees most of maxRegistered: the next
// comes after as many names given anew. in.mu must be held.
//
//go:noinline
func (in *Inspector) forgetRegistered() {
	for name := range in.registered {
		if in.tools[name] == nil && in.stalls[name] == nil {
			delete(in.registered, name)
		}
	}
}
