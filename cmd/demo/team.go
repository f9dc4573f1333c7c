package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// teamScripts are what the scripted lead, writer and reviewer say, by
// agent name (see models/scripted for the format).
//
//go:embed team.json
var teamScripts []byte

const (
	leadPrompt = "You lead a team of two agents working in one shared workspace folder: writer writes files and " +
		"runs shell commands there, reviewer only reads files. Do the user's task by delegating: give each a " +
		"complete task (they see nothing of this conversation), first the writer, then the reviewer to check the " +
		"result. When both are done, answer the user briefly with what the reviewer found."
	reviewerPrompt = "You review files in a workspace folder with read_file (a path, or \"\" to list the folder). " +
		"Read what the task names and report briefly and exactly what you found; you cannot change anything."
)

// teamScript returns the embedded script of the named agent.
func teamScript(name string) ([]byte, error) {
	var scripts map[string]json.RawMessage
	if err := json.Unmarshal(teamScripts, &scripts); err != nil {
		return nil, fmt.Errorf("embedded team scripts: %w", err)
	}
	s, ok := scripts[name]
	if !ok {
		return nil, fmt.Errorf("embedded team scripts: no script for %q", name)
	}
	return s, nil
}

// team builds the agents of -team: a lead that delegates through two
// tools, the writer agent (workspace tools; where -crash strikes) and the
// reviewer agent (read_file only). The sub-agents' events are shown
// indented under the call that delegated to them.
func (d *driver) team() (*agent.Agent, string, error) {
	toolset, err := workspace.Tools(d.ws)
	if err != nil {
		return nil, "", fmt.Errorf("workspace tools: %w", err)
	}
	// The writer: the solo agent's tools and prompt, and the crash.
	writerTools, err := d.in.wrapTools(slices.Concat(toolset, d.mcp))
	if err != nil {
		return nil, "", err
	}
	model, about, err := d.teamModel("writer", d.cfg.crash)
	if err != nil {
		return nil, "", err
	}
	wopts := &agent.Options{Name: "writer", Tools: writerTools, SystemPrompt: systemPromptFor(d.ws.Protections(), d.mcp)}
	d.crashable(wopts)
	writer, err := d.newAgent(d.in.wrapModel(model), wopts)
	if err != nil {
		return nil, "", err
	}
	// The reviewer reads.
	if model, _, err = d.teamModel("reviewer", crashPoint{}); err != nil {
		return nil, "", err
	}
	readOnly := slices.DeleteFunc(slices.Clone(toolset), func(t *tools.Tool) bool { return t.Name() != workspace.ReadFileToolName })
	reviewer, err := d.newAgent(model, &agent.Options{Name: "reviewer", Tools: readOnly, SystemPrompt: reviewerPrompt,
		MaxIterations: d.cfg.maxIterations, MaxAttempts: maxAttempts})
	if err != nil {
		return nil, "", err
	}
	// The lead delegates to both.
	var delegates []*tools.Tool
	for _, sub := range []struct {
		a    *agent.Agent
		desc string
	}{
		{writer, "Delegate a task to the writer agent, which writes files and runs shell commands in the workspace, and get its answer."},
		{reviewer, "Delegate a task to the reviewer agent, which reads files in the workspace (and changes nothing), and get its findings."},
	} {
		t, err := agent.AsTool(sub.a, &agent.ToolOptions{Description: sub.desc, Timeout: d.cfg.timeout,
			OnEvent: d.subEvent(sub.a.Name())})
		if err != nil {
			return nil, "", err
		}
		delegates = append(delegates, t)
	}
	if model, _, err = d.teamModel(leadName, crashPoint{}); err != nil {
		return nil, "", err
	}
	opts := &agent.Options{Name: leadName, Tools: delegates, SystemPrompt: leadPrompt,
		MaxIterations: d.cfg.maxIterations, MaxAttempts: maxAttempts}
	if d.sess != nil {
		opts.Store = d.sess.store
	}
	lead, err := d.newAgent(model, opts)
	if err != nil {
		return nil, "", err
	}
	about = strings.Replace(about, "scripted model (embedded script)", "scripted models (embedded scripts)", 1)
	return lead, "team: lead → writer, reviewer; " + about, nil
}

// teamModel makes the model of the named team agent: its embedded script,
// or the model the flags name (every agent of the team talks to it).
func (d *driver) teamModel(name string, crash crashPoint) (spec actors.Spec, about string, err error) {
	script, err := teamScript(name)
	if err != nil {
		return spec, "", err
	}
	spec, about, closeModel, err := newModel(d.cfg, d.tr, script, crash)
	if err != nil {
		return spec, "", err
	}
	d.closes = append(d.closes, closeModel)
	return spec, about, nil
}

// subEvent shows the events of the named sub-agent's delegations,
// indented, once the lead's call that started each one is shown.
func (d *driver) subEvent(name string) func(session string, ev agent.Event) {
	v := view{indent: "  ", name: name}
	var mu sync.Mutex
	unfinished := map[string]bool{} // by session: text was said since the last tool result
	return func(session string, ev agent.Event) {
		d.tr.WaitCall(name, delegation(session))
		mu.Lock()
		was := unfinished[session]
		switch ev.Kind {
		case agent.EventText:
			unfinished[session] = true
		case agent.EventToolResult, agent.EventRestart, agent.EventDone:
			delete(unfinished, session)
		}
		mu.Unlock()
		switch ev.Kind {
		case agent.EventDone:
			d.tr.EndText()
			d.mu.Lock()
			d.subs = append(d.subs, ev.Answer)
			d.mu.Unlock()
			return
		case agent.EventRestart:
			d.tr.NoteIn(v, "resume", "%s", d.resumeLine(ev, session, 1, was, false))
			return
		}
		d.tr.Event(v, ev)
	}
}

// delegation is the number of a delegation's session ("writer-2": 2).
func delegation(session string) int {
	n := 0
	if i := strings.LastIndexByte(session, '-'); i >= 0 {
		fmt.Sscanf(session[i+1:], "%d", &n)
	}
	return n
}
