package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/tools"
)

// uiFlag is the value of -ui: where to serve the live view.
type uiFlag struct{ addr string }

func (u *uiFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&u.addr, "ui", "",
		"serve a live view of the agents at `ADDR` (host:port on loopback, e.g.\n"+
			"127.0.0.1:8080; port 0 picks one): the supervision tree, the sessions, a feed\n"+
			"of supervision events, per-tool figures, and buttons that inject faults;\n"+
			"with it the demo keeps running after the answer until interrupted")
}

// liveView is the inspector the demo serves with -ui. A nil *liveView
// does nothing.
type liveView struct {
	insp *inspect.Inspector
	srv  *http.Server
	url  string
	tr   *transcript
	done chan error // the server's end
}

// startUI serves the inspector of rt on -ui's address, or returns nil
// without -ui. Fault injection is on: the demo is for experiments, and
// the address is loopback.
func startUI(cfg config, rt *actors.Runtime, tr *transcript) (*liveView, error) {
	if cfg.ui.addr == "" {
		return nil, nil
	}
	ln, err := inspect.Listen(cfg.ui.addr, nil)
	if err != nil {
		return nil, &usageError{err: fmt.Errorf("-ui: %w", err)}
	}
	insp, err := inspect.New(rt, &inspect.Options{Title: "Polyweave demo", Faults: true})
	if err != nil {
		ln.Close()
		return nil, err
	}
	u := &liveView{insp: insp, tr: tr, done: make(chan error, 1),
		srv: &http.Server{Handler: insp, ReadHeaderTimeout: 10 * time.Second},
		url: "http://" + ln.Addr().String() + "/"}
	go func() { u.done <- u.srv.Serve(ln) }()
	tr.Note("ui", "live view at %s (fault injection on)", u.url)
	return u, nil
}

// agent lets the inspector see an agent: its model's conversations, its
// tools (stallable), its tool results, its breakers, the calls waiting for
// approval and its durability position.
func (u *liveView) agent(model actors.Spec, opts *agent.Options) (actors.Spec, error) {
	if u == nil {
		return model, nil
	}
	toolset, err := u.insp.Tools(opts.Tools)
	if err != nil {
		return model, err
	}
	opts.Tools = toolset
	if prev := opts.OnToolResult; prev != nil {
		opts.OnToolResult = func(ev tools.ToolResultEvent) { u.insp.OnToolResult(ev); prev(ev) }
	} else {
		opts.OnToolResult = u.insp.OnToolResult
	}
	if prev := opts.Breaker.OnChange; prev != nil {
		opts.Breaker.OnChange = func(tool string, state tools.BreakerState) { u.insp.OnBreakerChange(tool, state); prev(tool, state) }
	} else {
		opts.Breaker.OnChange = u.insp.OnBreakerChange
	}
	opts.Approval = u.insp.Approval(opts.Approval)
	if opts.Store != nil {
		opts.Store = u.insp.Store(opts.Store)
	}
	return u.insp.Model(model), nil
}

// restore shows the calls a stored session held for approval when an
// earlier run stopped: the session holds them again once resumed.
func (u *liveView) restore(s *session) {
	if u == nil || s == nil {
		return
	}
	if err := u.insp.RestoreAgentApprovals(s.store, agentName, s.id); err != nil {
		u.tr.Note("ui", "the calls waiting for approval are not shown: %v%s", err, damageHint(s.path, err))
	}
}

// linger keeps the live view up until ctx ends (the demo is interrupted).
func (u *liveView) linger(ctx context.Context) {
	if u == nil {
		return
	}
	u.tr.Note("ui", "the live view stays up at %s: interrupt (Ctrl-C) to stop", u.url)
	select {
	case <-ctx.Done():
	case err := <-u.done:
		u.done <- err
		u.tr.Note("ui", "the live view stopped: %v", err)
	}
}

// close stops serving; the page's event streams end.
func (u *liveView) close() {
	if u == nil {
		return
	}
	u.insp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := u.srv.Shutdown(ctx); err != nil {
		u.srv.Close()
	}
	if err := <-u.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		u.tr.Note("ui", "the live view failed: %v", err)
	}
}
