package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// clusterMembers is how many member processes -cluster starts.
const clusterMembers = 3

// memberEnv, when set, makes the demo a cluster member (the -cluster run
// starts them): its value is the member's memberConfig as JSON.
const memberEnv = "POLYWEAVE_DEMO_MEMBER"

// clusterFlag is -cluster.
type clusterFlag struct{ on bool }

func (c *clusterFlag) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.on, "cluster", false,
		"run the session on a cluster of three member processes on loopback\n"+
			"(protoactor cluster, the automanaged provider), kept in PostgreSQL:\n"+
			"-store postgres://… or, without -store, a throwaway server (Debian's\n"+
			"postgresql). The member hosting the session is killed while its\n"+
			"run_command call runs (the demo holds the call until then), and the\n"+
			"session resumes on another member, which answers that call as\n"+
			"interrupted; the model runs it again. Scripted model only")
}

// isPostgres says whether -store names a PostgreSQL server.
func isPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// memberConfig is what a member process is told.
type memberConfig struct {
	Index  int      `json:"index"`
	Port   int      `json:"port"`  // its health-check port
	Hosts  []string `json:"hosts"` // every member's health-check host:port
	DSN    string   `json:"dsn"`
	Schema string   `json:"schema"`
	Root   string   `json:"root"` // sessions work in Root/<session id>
	// Held is a folder shared by the members: the first run_command call
	// of each session is held until its member dies (holdFirstCommand).
	Held string `json:"held"`
}

// clusterSchema is the PostgreSQL schema the demo's cluster keeps its
// sessions in.
const clusterSchema = "polyweave_demo"

// runCluster is the demo with -cluster: it starts the members, runs the
// session from a cluster client, kills the member that hosts it while its
// run_command call runs, and prints where the session ended.
func runCluster(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	switch {
	case cfg.baseURL != "" || cfg.provider != "":
		return &usageError{err: errors.New("-cluster runs the scripted model only: leave -base-url and -provider out")}
	case cfg.team || cfg.ui.addr != "" || len(cfg.mcp) > 0 || cfg.crash.site != crashNone || cfg.json:
		return &usageError{err: errors.New("-cluster does not combine with -team, -ui, -mcp, -crash or -json")}
	case cfg.approval.mode != approveAll || cfg.approval.undo || cfg.trace.file != "":
		// The members run every call without asking and trace nothing:
		// refusing is the only honest answer to -approve deny.
		return &usageError{err: errors.New("-cluster does not combine with -approve, -undo or -trace (its members run every tool call and record no spans)")}
	case cfg.store != "" && !isPostgres(cfg.store):
		return &usageError{err: fmt.Errorf("-cluster needs a store every member reaches: -store postgres://…, not %s", cfg.store)}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.timeout, errTimeout)
	defer cancel()
	// Whatever -timeout stopped (opening the store, starting the members,
	// the session's run) fails as a run without a final answer does.
	defer func() {
		if err != nil && errors.Is(context.Cause(ctx), errTimeout) {
			err = fmt.Errorf("%w (it passed while: %w)", timedOut(cfg), err)
		}
	}()
	start := time.Now()
	note := func(format string, a ...any) {
		fmt.Fprintf(stdout, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}

	dsn := cfg.store
	if dsn == "" {
		note("starting a throwaway PostgreSQL server (removed at exit)")
		srv, err := pgtest.Start(nil)
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w (or give -store postgres://…)", err)
		}
		defer srv.Stop()
		dsn = srv.DSN
		note("PostgreSQL is up, in %s", srv.Dir)
	}
	store, err := pgstore.Open(ctx, dsn, &pgstore.Options{Schema: clusterSchema})
	if err != nil {
		return err
	}
	defer store.Close()

	root, kept := cfg.workspace, "its files are in %s"
	if root == "" {
		if root, err = os.MkdirTemp("", "polyweave-cluster-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
		kept = "its files were in %s (removed at exit; -workspace keeps them)"
	}
	id := cfg.session
	if id == "" {
		id = newSessionID()
	}
	held, err := os.MkdirTemp("", "polyweave-cluster-held-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(held)

	ports, err := freeLoopbackPorts(clusterMembers)
	if err != nil {
		return err
	}
	hosts := make([]string, len(ports))
	for i, p := range ports {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var out sync.Mutex // members print concurrently
	members := make([]*member, len(ports))
	running := make(chan int, 1) // the index of the member holding the session's run_command call
	for i := range ports {
		mc := memberConfig{Index: i + 1, Port: ports[i], Hosts: hosts, DSN: dsn, Schema: clusterSchema, Root: root, Held: held}
		m, err := startMember(self, mc, func(line string) {
			out.Lock()
			defer out.Unlock()
			if rest, ok := strings.CutPrefix(line, "@running "); ok {
				if rest == id {
					select {
					case running <- mc.Index:
					default:
					}
				}
				return
			}
			note("[member %d] %s", mc.Index, line)
		})
		if err != nil {
			return err
		}
		defer m.stop()
		members[i] = m
	}
	for _, m := range members {
		select {
		case addr := <-m.ready:
			note("member %d is up: cluster address %s, health checks on %s", m.index, addr, hosts[m.index-1])
		case <-ctx.Done():
			return fmt.Errorf("members did not start: %w", context.Cause(ctx))
		}
	}

	client, err := cluster.Start(&cluster.Options{
		Client: true, Provider: cluster.Automanaged(0, hosts, 300*time.Millisecond),
		Store: store, Hold: 300 * time.Millisecond, RequestTimeout: time.Second,
	})
	if err != nil {
		return err
	}
	defer client.Close(context.WithoutCancel(ctx))

	note("session %s: %q", id, cfg.prompt)
	type outcome struct {
		res *cluster.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := client.Run(ctx, id, messages.RawParam("", models.ParamMessages,
			models.EncodeMessages([]models.Message{models.UserMessage(cfg.prompt)})))
		done <- outcome{res, err}
	}()
	killed := 0
	for {
		select {
		case i := <-running:
			killed = i
			members[i-1].kill()
			note("killed member %d with SIGKILL while the session's run_command call ran there: the session moves to another member, "+
				"which answers that call as interrupted (not run again: a command may not be run twice) and goes on", i)
		case o := <-done:
			if o.err != nil {
				return o.err
			}
			note("answer from member %s (activation %d of the session):\n\n%s\n", memberOf(o.res.Member, members), o.res.Epoch, o.res.Text)
			switch {
			case killed == 0:
				note("no member was killed: the session's run_command call was not held")
			case o.res.Epoch < 2:
				note("the session ended before the kill took effect")
			}
			fmt.Fprintf(stdout, "session %s kept in PostgreSQL (schema %s); "+kept+"\n", id, clusterSchema, filepath.Join(root, id))
			return nil
		}
	}
}

// memberOf names the member at a cluster address.
func memberOf(addr string, members []*member) string {
	for _, m := range members {
		if m.addr == addr {
			return fmt.Sprintf("%d (%s)", m.index, addr)
		}
	}
	return addr
}

func freeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// member is a member process started by runCluster.
type member struct {
	index int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan string // its cluster address, once up
	addr  string
	lines sync.WaitGroup
}

// startMember starts this program as member mc; each line it prints goes
// to onLine, but for the "@ready ADDR" line.
func startMember(self string, mc memberConfig, onLine func(string)) (*member, error) {
	b, err := json.Marshal(mc)
	if err != nil {
		return nil, err
	}
	m := &member{index: mc.Index, ready: make(chan string, 1)}
	m.cmd = exec.Command(self)
	m.cmd.Env = append(os.Environ(), memberEnv+"="+string(b))
	m.cmd.Stderr = os.Stderr
	m.cmd.SysProcAttr = dieWithParent()
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start member %d: %w", mc.Index, err)
	}
	m.lines.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "@ready "); ok {
				m.addr = addr
				m.ready <- addr
				continue
			}
			onLine(sc.Text())
		}
	})
	return m, nil
}

func (m *member) kill() { _ = m.cmd.Process.Kill() }

// stop closes the member's stdin (it leaves the cluster and exits) and
// waits for it, killing it after ten seconds.
func (m *member) stop() {
	m.stdin.Close()
	t := time.AfterFunc(10*time.Second, m.kill)
	m.lines.Wait()
	_ = m.cmd.Wait()
	t.Stop()
}

// sessionDir is the folder of session id under the cluster's root, one
// of its own: the id comes over the network, from anyone who reaches a
// member, so it must name a folder as -session's does (validSessionID),
// never "..", "." or a path, which would lead out of the root or to the
// root itself, shared by every such session.
func sessionDir(root, id string) (string, error) {
	if !validSessionID(id) {
		return "", fmt.Errorf("session id %q does not name a folder (letters, digits, and '.', '_' or '-' after the first; at most %d)", id, maxSessionID)
	}
	dir := filepath.Join(root, id)
	if rel, err := filepath.Rel(root, dir); err != nil || !filepath.IsLocal(rel) || rel == "." {
		return "", fmt.Errorf("session id %q leads outside the cluster's root %s", id, root)
	}
	return dir, nil
}

// runMember is the demo as a cluster member (memberEnv is set): it hosts
// sessions until its stdin closes. Each session runs the embedded script
// in its own folder under the shared root.
func runMember(ctx context.Context, raw string, stdout io.Writer) error {
	var mc memberConfig
	if err := json.Unmarshal([]byte(raw), &mc); err != nil {
		return fmt.Errorf("member: %s: %w", memberEnv, err)
	}
	store, err := pgstore.Open(ctx, mc.DSN, &pgstore.Options{Schema: mc.Schema})
	if err != nil {
		return err
	}
	defer store.Close()
	script, err := loadScript(defaultScript)
	if err != nil {
		return err
	}
	// The member that hosts the session is killed while its run_command
	// call runs: the next member answers the call as interrupted, and
	// the model, reading that, runs the command again.
	script = retryCall(script, 2, "was interrupted: the member running it was killed")
	// A model takes its time: here, a second per answer after the first.
	for i := 1; i < len(script.Turns); i++ {
		script.Turns[i].Delay = time.Second
	}
	model, err := scripted.New(script, nil)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, format+"\n", a...)
	}
	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	session := func(id string) (actors.Spec, *tools.LoopOptions, error) {
		dir, err := sessionDir(mc.Root, id)
		if err != nil {
			return actors.Spec{}, nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return actors.Spec{}, nil, err
		}
		ws, err := workspace.New(dir, nil)
		if err != nil {
			return actors.Spec{}, nil, err
		}
		mu.Lock()
		closers = append(closers, ws.Close)
		mu.Unlock()
		ts, err := workspace.Tools(ws)
		if err != nil {
			return actors.Spec{}, nil, err
		}
		if ts, err = holdFirstCommand(ts, mc.Held, id, say); err != nil {
			return actors.Spec{}, nil, err
		}
		say("session %s activated here; it works in %s", id, dir)
		return model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Name: "agent", Tools: ts},
			SystemPrompt:  systemPromptFor(ws.Protections(), nil),
			// The retry of the interrupted call is a round of its own.
			MaxIterations: defaultMaxIterations,
			OnToolResult: func(ev tools.ToolResultEvent) {
				say("session %s: %s → %s", id, clip(ev.Call.GetName()+" "+string(ev.Call.GetPayload())), clip(string(ev.Result.GetPayload())))
			},
		}, nil
	}
	m, err := cluster.Start(&cluster.Options{
		Provider: cluster.Automanaged(mc.Port, mc.Hosts, 300*time.Millisecond),
		Store:    store, Session: session,
		Hold: 300 * time.Millisecond, RequestTimeout: time.Second,
	})
	if err != nil {
		return err
	}
	say("@ready %s", m.Address())
	io.Copy(io.Discard, os.Stdin) // until the demo is done with us
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Close(cctx)
}

// holdFirstCommand returns ts with a run_command that holds the first
// call of session id, in whichever member runs it, until the call's
// context ends (the member is killed; or it stops), so that the kill
// falls while the call runs, every time: the member says "@running id"
// once it holds it. The folder held, shared by the members, marks the
// sessions whose call was held; the calls after it run.
func holdFirstCommand(ts []*tools.Tool, held, id string, say func(format string, a ...any)) ([]*tools.Tool, error) {
	if held == "" {
		return ts, nil
	}
	out := slices.Clone(ts)
	for i, t := range out {
		if t.Name() != workspace.RunCommandToolName {
			continue
		}
		def := t.Definition()
		run := def.Handler
		def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
			f, err := os.OpenFile(filepath.Join(held, id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			switch {
			case errors.Is(err, fs.ErrExist): // held once already
				return run(ctx, args)
			case err != nil:
				return nil, fmt.Errorf("mark the call held: %w", err)
			}
			f.Close()
			say("session %s: %s is running (held until its member is killed)", id, clip(def.Name+" "+string(args)))
			say("@running %s", id)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		var err error
		if out[i], err = tools.New(def); err != nil {
			return nil, fmt.Errorf("hold %s: %w", def.Name, err)
		}
	}
	return out, nil
}
