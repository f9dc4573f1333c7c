package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
)

// figure is one of the figures: it measures its rows.
type figure struct {
	id, title string
	run       func(c *config) []Row
}

var figures = []figure{
	{"1", "TEXT frames/s through wrappers vs bare protoactor forwarding", figureHops},
	{"2", "tool-call round trip vs bare protoactor request/respond", figureRoundTrip},
	{"3", "streaming argument accumulation vs strings.Builder + json.Unmarshal", figureAccumulation},
	{"4", "durability", figureDurability},
	{"5", "memory per idle session", figureMemory},
	{"6", "workspace tools vs os and exec", figureWorkspace},
	{"7", "the 3-tool-call conversation: our loop, the floor and the peers", figureConversation},
	{"8", "beyond one machine: remote tools, the PostgreSQL store", figureCluster},
	{"9", "MCP: our server vs the go-sdk's, an imported tool vs the go-sdk client", figureMCP},
}

// rows measures the selected pairs of a figure.
func (c *config) rows(pairs []pair) []Row {
	var out []Row
	for _, p := range pairs {
		if c.selected(p.figure, p.name) {
			out = append(out, c.compare(p))
		}
	}
	return out
}

func figureHops(c *config) []Row {
	var pairs []pair
	for _, n := range []int{1, 3} {
		hops := 2*n + 1
		pairs = append(pairs, pair{figure: "1", name: fmt.Sprintf("%d wrapper(s), %d hops", n, hops),
			ours: benchSide("polyweave", func(b *testing.B) { benchWrapperHops(b, n) }),
			base: benchSide("protoactor", func(b *testing.B) { benchBareHops(b, hops) }),
			kind: throughput, unit: "frames", goal: ratioAtLeast(0.75)})
	}
	return c.rows(pairs)
}

func figureRoundTrip(c *config) []Row {
	pingpong := benchSide("protoactor ping-pong", benchBarePingPong)
	router := func(sync, validated bool) side {
		return benchSide("router", func(b *testing.B) { benchRouterPingPong(b, sync, validated) })
	}
	return c.rows([]pair{
		{figure: "2", name: "sync no-op tool, inline (2 hops)", ours: router(true, false), base: pingpong,
			kind: duration, unit: "call", goal: ratioAtMost(2)},
		{figure: "2", name: "async no-op tool (tool actor)", ours: router(false, false), base: pingpong,
			kind: duration, unit: "call", goal: info},
		{figure: "2", name: "sync, arguments validated", ours: router(true, true), base: pingpong,
			kind: duration, unit: "call", goal: info},
		{figure: "2", name: "sync, on protoactor's default dispatcher", ours: benchSide("router", func(b *testing.B) {
			runtimeOptions = &actors.RuntimeOptions{Dispatcher: actor.NewDefaultDispatcher(300)}
			defer func() { runtimeOptions = nil }()
			benchRouterPingPong(b, true, false)
		}), base: pingpong, kind: duration, unit: "call", goal: info,
			note: "the same router on a goroutine per mailbox run, as the baseline: what the runtime's worker pool is worth"},
		{figure: "2", name: "sync vs RequestFuture", ours: router(true, false),
			base: benchSide("protoactor RequestFuture", benchRequestFuture),
			kind: duration, unit: "call", goal: info},
	})
}

func figureAccumulation(c *config) []Row {
	sizes := []int{64 << 10, 1 << 20, 8 << 20}
	if c.smoke {
		sizes = []int{4 << 10, 32 << 10}
	}
	var rows []Row
	var first, last *Row
	for _, size := range sizes {
		st := newArgStream(size)
		rs := c.rows([]pair{{figure: "3", name: sizeName(size) + " in 64-byte chunks",
			ours: benchSide("assembler", st.benchAssemble), base: benchSide("builder+Unmarshal", st.benchBuilder),
			kind: duration, unit: "MiB", per: float64(st.size) / (1 << 20), goal: ratioAtMost(1.5)}})
		rows = append(rows, rs...)
	}
	for i := range rows {
		if rows[i].Error != "" {
			continue
		}
		if first == nil {
			first = &rows[i]
		}
		last = &rows[i]
	}
	if first != nil && last != first {
		lin := Row{Figure: "3", Case: fmt.Sprintf("linearity: time/byte %s ÷ %s", last.Case[:len(last.Case)-len(" in 64-byte chunks")],
			first.Case[:len(first.Case)-len(" in 64-byte chunks")]),
			Unit: "×", Ours: last.Ours / first.Ours, BaselineName: "builder+Unmarshal", Baseline: last.Baseline / first.Baseline,
			Rounds: last.Rounds}
		g := oursAtMost(1.3, "≤ 1.3×")
		lin.Goal, lin.Met = g.text, g.met(&lin)
		rows = append(rows, lin)
	}
	return rows
}

func figureDurability(c *config) []Row {
	chunks := func(name string, where routerDurability, sessions int) side {
		return metricSide(name, "chunks/s", func(b *testing.B) { benchRouterChunks(b, where, sessions) })
	}
	streams := 64
	if c.smoke {
		streams = 2
	}
	memOn, memOff := interleavedSides([2]string{"in-memory", "durability off"}, "RouterMemVsOff", false, c.abTime(3), routerMemVsOff)
	rows := c.rows([]pair{
		{figure: "4", name: "router chunks/s, in-memory store, 1 stream", ours: memOn, base: memOff,
			kind: throughput, unit: "chunks", goal: ratioAtLeast(0.8),
			note: fmt.Sprintf("one run per round, the sides interleaved: two routers (one persisting to an in-memory store, one with durability off) stream %d calls of %d chunks in turn, the wall time of each side summed over its turns, so that the machine's load drifting during the round falls on both", routerSliceCalls, routerChunks)},
		{figure: "4", name: "router chunks/s, bbolt, 1 stream", ours: chunks("bbolt", durabilityBolt, 1),
			base: chunks("durability off", durabilityOff, 1), kind: throughput, unit: "chunks", goal: info},
		{figure: "4", name: fmt.Sprintf("router chunks/s, bbolt, %d streams", streams), ours: chunks("bbolt", durabilityBolt, streams),
			base: chunks("durability off", durabilityOff, streams), kind: throughput, unit: "chunks",
			goal: oursAtLeast(100_000, "≥ 100 000/s")},
		{figure: "4", name: "router recovery of 10 000 pending calls (bbolt)", ours: benchSide("router", benchRouterRecovery),
			kind: duration, unit: "recovery", goal: oursAtMost(200_000, "< 200 ms")},
		{figure: "4", name: "loop session, 1 MiB streamed argument, in-memory store",
			ours: benchSide("session in memory", func(b *testing.B) { benchLoopBigArg(b, openMem) }),
			base: benchSide("no session", func(b *testing.B) { benchLoopBigArg(b, nil) }),
			kind: duration, unit: "conversation", goal: ratioAtMost(2)},
		{figure: "4", name: "loop session, 1 MiB streamed argument, bbolt",
			ours: benchSide("session on bbolt", func(b *testing.B) { benchLoopBigArg(b, openBolt(nil)) }),
			base: benchSide("no session", func(b *testing.B) { benchLoopBigArg(b, nil) }),
			kind: duration, unit: "conversation", goal: ratioAtMost(2)},
		{figure: "4", name: "store: persist, bbolt, 64 writers",
			ours: benchSide("boltstore", func(b *testing.B) { benchPersist(b, 64, openBolt(nil)) }),
			base: benchSide("bbolt db.Batch", func(b *testing.B) { benchBoltBatch(b, 64) }),
			kind: throughput, unit: "events", goal: info},
	})
	rows = append(rows, routerChecksumRows(c)...)
	return append(rows, storeRows(c)...)
}

func figureMemory(c *config) []Row {
	n := 10_000
	switch {
	case c.smoke:
		n = 50
	case c.quick:
		n = 2_000
	}
	// The heap's growth over the spawn is the sessions' memory, unless
	// something else of the process (a previous row's actors still
	// winding down) freed more meanwhile: a growth of zero or less says
	// nothing of the sessions, so it is measured again, a few times.
	measure := func(name string, f func(int) (float64, error)) side {
		return side{name: name, measure: func() sample {
			for try := 1; ; try++ {
				kib, err := f(n)
				if err != nil || kib > 0 {
					return sample{ns: kib, err: err}
				}
				if try == 3 {
					return sample{err: fmt.Errorf("the heap shrank by %.1f KiB per session while %s was measured, %d times", -kib, name, try)}
				}
			}
		}}
	}
	rounds := c.rounds
	c2 := *c
	c2.rounds = min(rounds, 3)
	return c2.rows([]pair{{figure: "5", name: fmt.Sprintf("%d idle sessions (loop+installer+router+model+3 tools)", n),
		ours: measure("polyweave", sessionMemory),
		base: measure(fmt.Sprintf("%d bare actors", actorsPerSession), bareActorMemory),
		kind: memory, unit: "KiB/session", goal: oursAtMost(64, "≤ 64 KiB")}})
}

func figureWorkspace(c *config) []Row {
	sizes := []int{4 << 10, 1 << 20}
	dir, err := os.MkdirTemp("", "polyweave-bench-ws-")
	if err != nil {
		return []Row{{Figure: "6", Case: "workspace", Error: err.Error()}}
	}
	defer os.RemoveAll(dir)
	fx, err := newWSFixture(dir, sizes)
	if err != nil {
		return []Row{{Figure: "6", Case: "workspace", Error: err.Error()}}
	}
	defer fx.Close()
	var pairs []pair
	for _, n := range sizes {
		pairs = append(pairs,
			pair{figure: "6", name: "read " + sizeName(n),
				ours: benchSide("workspace", func(b *testing.B) { fx.benchRead(b, n) }),
				base: benchSide("os.ReadFile", func(b *testing.B) { fx.benchOSRead(b, n) }),
				kind: duration, unit: "op", goal: ratioAtMost(1.5)},
			pair{figure: "6", name: "write " + sizeName(n),
				ours: benchSide("workspace", func(b *testing.B) { fx.benchWrite(b, n) }),
				base: benchSide("os.WriteFile", func(b *testing.B) { fx.benchOSWrite(b, n) }),
				kind: duration, unit: "op", goal: ratioAtMost(1.5),
				note: "the workspace write is atomic and durable (temp file, fsync, rename, fsync dir); os.WriteFile is neither"},
			pair{figure: "6", name: "write " + sizeName(n) + ", like for like",
				ours: benchSide("workspace", func(b *testing.B) { fx.benchWrite(b, n) }),
				base: benchSide("os atomic+fsync", func(b *testing.B) { fx.benchAtomicWrite(b, n) }),
				kind: duration, unit: "op", goal: ratioAtMost(1.5)},
		)
	}
	cmdPairs, closeCmd, err := commandPairs(dir)
	if err != nil {
		return append(c.rows(pairs), Row{Figure: "6", Case: "run_command", Error: err.Error()})
	}
	defer closeCmd()
	return c.rows(append(pairs, cmdPairs...))
}

// einoPerCPU measures the rows against Eino per CPU second (information):
// our runs per second of the process's CPU time against the Eino peer's,
// which on a shared machine says more than runs per second of the clock.
func (c *config) einoPerCPU(p *peer, r [2]int) []Row {
	perCPU := func(name string, fn func(b *testing.B)) side {
		return metricSide(name, "runs/cpu-s", fn)
	}
	var rows []Row
	for _, pc := range []struct {
		name  string
		ours  side
		extra []string
	}{
		{"(a) vs eino, per CPU second", perCPU("loop", func(b *testing.B) { benchLoopConversation(b, true) }), nil},
		{"(a) with async tools vs eino, per CPU second", perCPU("loop", func(b *testing.B) { benchLoopConversation(b, false) }), nil},
		{"(s) streaming vs eino Stream, per CPU second", perCPU("streaming loop", benchStreamingConversation), []string{"--stream"}},
	} {
		if !c.selected("7", pc.name) {
			continue
		}
		row := c.compare(pair{figure: "7", name: pc.name, ours: pc.ours, base: p.cpuSide(r[0], r[1], pc.extra...),
			kind: throughput, unit: "runs per CPU", goal: info})
		if row.Error == "" {
			row.Note = p.version + ": runs per second of each process's CPU time (user and system, garbage collection included)"
		}
		rows = append(rows, row)
	}
	return rows
}

// The goals of row (a) (sync tools) against each peer, the rows of the
// streaming conversation against the peers streaming it, and their goals.
var (
	peerGoal          = map[string]float64{"eino": 2, "ai-sdk": 1}
	streamingPeerRow  = map[string]string{"eino": "(s) streaming vs eino Stream", "ai-sdk": "(s) streaming vs ai-sdk streamText"}
	streamingPeerGoal = map[string]float64{"eino": 1.5, "ai-sdk": 20}
)

func figureConversation(c *config) []Row {
	loop := func(sync bool) side {
		return benchSide("loop", func(b *testing.B) { benchLoopConversation(b, sync) })
	}
	rows := c.rows([]pair{
		{figure: "7", name: "(a) our loop + scripted adapter vs (b) floor", ours: loop(true),
			base: benchSide("plain Go loop", benchFloorConversation), kind: throughput, unit: "runs", goal: info},
		{figure: "7", name: "(a) with async tools vs (b) floor", ours: loop(false),
			base: benchSide("plain Go loop", benchFloorConversation), kind: throughput, unit: "runs", goal: info},
		{figure: "7", name: "(s) streaming: arguments in 8-byte chunks, text in 1-byte deltas, vs (a)",
			ours: benchSide("streaming loop", benchStreamingConversation), base: loop(true),
			kind: throughput, unit: "runs", goal: info,
			note: "the same conversation streamed: what assembling the calls' chunks and passing the deltas costs our loop"},
	})
	rows = append(rows, figureAgents(c)...)
	rows = append(rows, figureTracing(c)...)
	rows = append(rows, figureInspector(c)...)
	rows = append(rows, interleavedRunRows(c)...)
	if c.peers == "" {
		return rows
	}
	var want []string
	for _, name := range []string{"ai-sdk", "eino"} {
		rows := []string{"(a) vs " + name, streamingPeerRow[name]}
		if name == "eino" {
			rows = append(rows, "(a) with async tools vs eino", "(a) vs eino, per CPU second",
				"(a) with async tools vs eino, per CPU second", "(s) streaming vs eino Stream, per CPU second")
		}
		if slices.ContainsFunc(rows, func(row string) bool { return c.selected("7", row) }) {
			want = append(want, name)
		}
	}
	if len(want) == 0 {
		return rows
	}
	scratch, err := os.MkdirTemp("", "polyweave-bench-peers-")
	if err != nil {
		return append(rows, Row{Figure: "7", Case: "peers", Error: err.Error()})
	}
	defer os.RemoveAll(scratch)
	c.logf("preparing peers (bench/peers/setup.sh)...")
	runs := map[string][2]int{"ai-sdk": {2000, 200}, "eino": {20000, 1000}}
	if c.quick {
		runs = map[string][2]int{"ai-sdk": {500, 100}, "eino": {5000, 500}}
	}
	if c.smoke {
		runs = map[string][2]int{"ai-sdk": {5, 1}, "eino": {5, 1}}
	}
	for _, p := range preparePeers(context.Background(), c.peers, scratch) {
		name := "(a) vs " + p.name
		r := runs[p.name]
		if p.unready != "" {
			for _, u := range []struct {
				name string
				goal goal
			}{{name, ratioAtLeast(peerGoal[p.name])}, {streamingPeerRow[p.name], ratioAtLeast(streamingPeerGoal[p.name])}} {
				if c.selected("7", u.name) {
					rows = append(rows, Row{Figure: "7", Case: u.name, Goal: u.goal.text, Error: "peer " + p.name + " could not run: " + p.unready})
				}
			}
			continue
		}
		if c.selected("7", streamingPeerRow[p.name]) {
			row := c.compare(pair{figure: "7", name: streamingPeerRow[p.name], ours: benchSide("streaming loop", benchStreamingConversation),
				base: p.side(r[0], r[1], "--stream"), kind: throughput, unit: "runs", goal: ratioAtLeast(streamingPeerGoal[p.name])})
			if row.Error == "" {
				row.Note = p.version + fmt.Sprintf(", %d runs per measurement; the conversation of row (s)", r[0])
			}
			rows = append(rows, row)
		}
		if p.name == "eino" {
			rows = append(rows, c.einoPerCPU(p, r)...)
		}
		if p.name == "eino" && c.selected("7", "(a) with async tools vs eino") {
			row := c.compare(pair{figure: "7", name: "(a) with async tools vs eino", ours: loop(false), base: p.side(r[0], r[1]),
				kind: throughput, unit: "runs", goal: ratioAtLeast(1)})
			if row.Error == "" {
				row.Note = p.version + fmt.Sprintf(", %d runs per measurement; each call on a tool actor, its handler on a goroutine", r[0])
			}
			rows = append(rows, row)
		}
		if !c.selected("7", name) {
			continue
		}
		row := c.compare(pair{figure: "7", name: name, ours: loop(true), base: p.side(r[0], r[1]),
			kind: throughput, unit: "runs", goal: ratioAtLeast(peerGoal[p.name])})
		if row.Error == "" {
			row.Note = p.version + fmt.Sprintf(", %d runs per measurement", r[0])
		}
		rows = append(rows, row)
		if p.name == "eino" && c.selected("7", "(a) through agent.Run vs eino") {
			row := c.compare(pair{figure: "7", name: "(a) through agent.Run vs eino", base: p.side(r[0], r[1]),
				ours: metricSide("one agent", "runs/s", func(b *testing.B) { benchAgentConversation(b, true) }),
				kind: throughput, unit: "runs", goal: ratioAtLeast(1)})
			if row.Error == "" {
				row.Note = p.version + fmt.Sprintf(", %d runs per measurement", r[0])
			}
			rows = append(rows, row)
		}
	}
	return rows
}
