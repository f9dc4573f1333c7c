package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// agentName is the demo agent's name: with -store, its sessions are kept
// under agent.SessionKey of it and the session id.
const agentName = "agent"

// leadName is the name of a -team run's lead agent.
const leadName = "lead"

// session is the durable side of a run with -store: the bbolt file the
// tool loop persists the conversation in, at every step, under the
// agent's key of the session id.
type session struct {
	id    string
	key   string // the store's key of the session: agent.SessionKey of the agent that runs it
	path  string
	store *boltstore.Store
	// stored is the session as the store held it when the run began; nil
	// for a new session.
	stored *messages.LoopSession
	// first is the "messages" payload of the request that started the
	// session. Sending it again resumes the session where it stopped.
	first json.RawMessage
}

// openSession opens the store and looks the session up. A new session
// starts with prompt; a stored one goes on with the request it was
// started with, which an explicit -prompt must match.
func openSession(ctx context.Context, cfg config) (*session, error) {
	st, err := boltstore.Open(cfg.store, nil)
	if err != nil {
		return nil, fmt.Errorf("open -store: %w", err)
	}
	s := &session{id: cfg.session, path: cfg.store, store: st}
	if s.id == "" {
		s.id = newSessionID()
	}
	who, other := agentName, leadName
	if cfg.team {
		who, other = leadName, agentName // the lead agent runs a team's session
	}
	s.key = agent.SessionKey(who, s.id)
	s.first = models.EncodeMessages([]models.Message{models.UserMessage(cfg.prompt)})
	stored, ok, err := tools.ReadSession(ctx, st, s.key)
	if err != nil {
		st.Close()
		return nil, err
	}
	if !ok {
		// A session run by the other agent (with or without -team) lives
		// under its key: starting this one anew would run everything again
		// in the session's folder.
		_, theirs, err := tools.ReadSession(ctx, st, agent.SessionKey(other, s.id))
		switch {
		case err != nil:
			st.Close()
			return nil, err
		case theirs && cfg.team:
			st.Close()
			return nil, &usageError{err: fmt.Errorf("session %q was started without -team; drop -team to resume it, or start a new session", s.id)}
		case theirs:
			st.Close()
			return nil, &usageError{err: fmt.Errorf("session %q was started with -team; add -team to resume it, or start a new session", s.id)}
		}
		return s, nil
	}
	if cfg.promptSet && !bytes.Equal(stored.GetFirstRequest(), s.first) {
		st.Close()
		return nil, &usageError{err: fmt.Errorf("session %q was started with another prompt (%s); leave -prompt out to resume it, or start a new session",
			s.id, clip(firstPrompt(stored.GetFirstRequest())))}
	}
	s.stored, s.first = stored, stored.GetFirstRequest()
	return s, nil
}

// newSessionID names a new session after the time it starts, with a
// random suffix so that two runs in the same second do not collide.
func newSessionID() string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux
	return "s-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// workspaceDir is where a durable session works when -workspace is not
// given: a folder per session beside the store, kept so that a resumed
// session finds its files.
func (s *session) workspaceDir() (string, error) {
	dir := filepath.Join(s.path+".files", s.id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make session workspace: %w", err)
	}
	return dir, nil
}

// describe says what the store holds of the session.
func (s *session) describe() string {
	if s.stored == nil {
		return fmt.Sprintf("new session %s in %s", s.id, s.path)
	}
	state := map[messages.LoopPhase]string{
		messages.LoopPhase_LOOP_PHASE_MODEL: "it stopped while the model was answering",
		messages.LoopPhase_LOOP_PHASE_TOOLS: "it stopped while tools were running",
		messages.LoopPhase_LOOP_PHASE_DONE:  "it has ended: its final answer comes from the store",
	}[s.stored.GetPhase()]
	return fmt.Sprintf("resuming session %s from %s after %s; %s",
		s.id, s.path, plural(int(s.stored.GetIteration()), "tool round"), state)
}

// resumeHint is the command line that resumes the session: -store and
// -session, and the flags that shape the agent the session was run by
// (its workspace, -team, its model, its tools, its approvals, its
// -max-iterations), each quoted for a POSIX shell. -prompt is left out
// (a resumed session goes on with its own), and so are the flags of one
// run only (-timeout, -crash, -json, -ui, -trace).
func (s *session) resumeHint(cfg config) string {
	args := []string{"go", "run", "./cmd/demo", "-store", s.path, "-session", s.id}
	add := func(on bool, flag, value string) {
		if on {
			args = append(args, flag, value)
		}
	}
	add(cfg.workspace != "", "-workspace", cfg.workspace)
	if cfg.team {
		args = append(args, "-team")
	}
	add(cfg.provider != "", "-provider", cfg.provider)
	add(cfg.baseURL != "", "-base-url", cfg.baseURL)
	add(cfg.modelSet, "-model", cfg.model)
	add(cfg.apiKeyEnvSet, "-api-key-env", cfg.apiKeyEnv)
	for _, m := range cfg.mcp {
		add(true, "-mcp", m.raw)
	}
	add(cfg.approval.mode != "" && cfg.approval.mode != approveAll, "-approve", cfg.approval.mode)
	if cfg.approval.undo {
		args = append(args, "-undo")
	}
	// The store keeps the conversation, not the limit it ran under.
	add(cfg.maxIterations != 0 && cfg.maxIterations != defaultMaxIterations, "-max-iterations", strconv.Itoa(cfg.maxIterations))
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// persisted says whether the store holds anything of the session: a run
// cut before the tool loop's first step leaves nothing to resume.
func (s *session) persisted(ctx context.Context) (bool, error) {
	_, ok, err := tools.ReadSession(context.WithoutCancel(ctx), s.store, s.key)
	return ok, err
}

// shellQuote returns word as a POSIX shell reads it back: unchanged when
// it has only characters no shell treats specially, else in single
// quotes (a single quote inside is closed, escaped and opened again).
func shellQuote(word string) string {
	if word == "" {
		return "''"
	}
	plain := true
	for _, r := range word {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:=@%+,", r)) {
			plain = false
			break
		}
	}
	if plain {
		return word
	}
	return "'" + strings.ReplaceAll(word, "'", `'\''`) + "'"
}

func (s *session) close() error { return s.store.Close() }

// firstPrompt is the text of the last user message of a first request.
func firstPrompt(payload []byte) string {
	msgs, err := models.DecodeMessages(payload)
	if err != nil {
		return string(payload)
	}
	var last []string
	for _, m := range msgs {
		if m.Role == models.RoleUser {
			last = []string{m.Content}
		}
	}
	return strings.Join(last, "")
}

// sessionLine renders the payload of a loop's META session frame. Of
// the held calls, those in answered (answered at the terminal) go on with
// the answer; the others wait for approval again.
func sessionLine(payload []byte, answered map[string]bool) string {
	var ev tools.SessionEvent
	if json.Unmarshal(payload, &ev) != nil {
		return string(payload)
	}
	var given []string
	ev.Held = slices.DeleteFunc(ev.Held, func(id string) bool {
		if answered[id] {
			given = append(given, id)
		}
		return answered[id]
	})
	line := fmt.Sprintf("%s after %s", ev.Event, plural(ev.Iteration, "tool round"))
	for _, part := range []struct {
		what string
		ids  []string
	}{{"reused the stored results of", ev.Reused}, {"ran again", ev.Rerun}, {"interrupted (not run again)", ev.Interrupted}, {"waits for approval again", ev.Held}, {"goes on with the answer given to", given}} {
		if len(part.ids) > 0 {
			line += "; " + part.what + " " + strings.Join(part.ids, ", ")
		}
	}
	return line
}
