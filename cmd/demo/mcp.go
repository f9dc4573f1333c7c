package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// mcpUsage documents -mcp.
const mcpUsage = "give the agent the tools of the MCP server that `[name=]command args…` runs\n" +
	"(over stdio, supervised: restarted with back-off if it dies); repeatable.\n" +
	"Words split at blanks, with '…' and \"…\" quoting and \\ escapes; with name=\n" +
	"its tools are called name_<tool>, to avoid clashes. Example:\n" +
	"-mcp 'fs=npx -y @modelcontextprotocol/server-filesystem /tmp'"

// mcpServer is one -mcp: the server's command line and the prefix of its
// tools ("" or name + "_").
type mcpServer struct {
	prefix  string
	command []string
	raw     string // the flag's value, for the resume hint
}

// mcpServers is the value of -mcp (repeatable).
type mcpServers []mcpServer

func (m *mcpServers) String() string {
	if m == nil {
		return ""
	}
	var out []string
	for _, s := range *m {
		out = append(out, s.prefix+strings.Join(s.command, " "))
	}
	return strings.Join(out, "; ")
}

// serverName is the name= of an -mcp value.
var serverName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*=`)

// Set parses one -mcp value.
func (m *mcpServers) Set(v string) error {
	s := mcpServer{raw: v}
	if name := serverName.FindString(v); name != "" {
		s.prefix = strings.TrimSuffix(name, "=") + "_"
		v = v[len(name):]
	}
	words, err := splitWords(v)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return errors.New("no command to run")
	}
	s.command = words
	*m = append(*m, s)
	return nil
}

// splitWords splits a command line into words the way a shell would for
// plain words: at unquoted blanks, with '…' (literal), "…" (where \ escapes
// " and \) and \ outside quotes escaping the next character. Nothing is
// expanded.
func splitWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	quote := rune(0)
	escaped := false
	for _, r := range line {
		switch {
		case escaped:
			if quote == '"' && r != '"' && r != '\\' {
				word.WriteRune('\\')
			}
			word.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	switch {
	case escaped:
		return nil, fmt.Errorf("%q ends with a lone \\", line)
	case quote != 0:
		return nil, fmt.Errorf("%q has an unclosed %c", line, quote)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// mcpConnectTimeout bounds starting one -mcp server and reading its tools
// (an npx server may be downloaded first). A variable for the tests.
var mcpConnectTimeout = time.Minute

// importMCP starts the -mcp servers and returns their tools, checked
// against the names of the tools the agent already has, and a function
// that stops them. The connections are supervised actors on a runtime of
// their own (its supervision events go to the transcript), which outlives
// the agent's: release runs after the agent's runtime has stopped.
func importMCP(ctx context.Context, servers mcpServers, ws *workspace.Workspace, tr *transcript) (ts []*tools.Tool, release func(), err error) {
	if len(servers) == 0 {
		return nil, func() {}, nil
	}
	taken, err := workspace.Tools(ws)
	if err != nil {
		return nil, nil, fmt.Errorf("workspace tools: %w", err)
	}
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{OnSupervision: tr.Supervision})
	if err != nil {
		return nil, nil, fmt.Errorf("start actors for -mcp: %w", err)
	}
	var imports []*mcp.Imported
	release = func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
		defer cancel()
		for _, im := range imports {
			_ = im.Close(closeCtx)
		}
		_ = rt.Close(closeCtx)
	}
	owner := map[string]string{}
	for _, t := range taken {
		owner[t.Name()] = "the workspace"
	}
	for _, s := range servers {
		what := strings.Join(s.command, " ")
		tr.Note("mcp", "starting %s and waiting for its tool list (up to %v)", what, mcpConnectTimeout)
		im, err := mcp.Import(ctx, rt, &mcp.ImportOptions{Command: s.command, Prefix: s.prefix,
			ConnectTimeout: mcpConnectTimeout, Stderr: &noteWriter{tr: tr, label: "mcp", prefix: filepath.Base(s.command[0]) + ": "},
			OnToolsChanged: func(ts []*tools.Tool) {
				tr.Note("mcp", "%s now offers %s (this run keeps the tools it started with)", what, toolNames(ts))
			}})
		if err != nil {
			release()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil, nil, fmt.Errorf("-mcp %s: the server did not answer initialize and list its tools within %v", what, mcpConnectTimeout)
			}
			return nil, nil, fmt.Errorf("-mcp: %w", err) // err names the command
		}
		imports = append(imports, im)
		for _, t := range im.Tools() {
			if o, dup := owner[t.Name()]; dup {
				release()
				return nil, nil, &usageError{err: fmt.Errorf("-mcp %s: its tool %s clashes with a tool of %s: name the server (-mcp 'name=%s') to prefix its tools",
					what, t.Name(), o, what)}
			}
			owner[t.Name()] = what
			ts = append(ts, t)
		}
		tr.Note("mcp", "%s: %s", what, toolNames(im.Tools()))
	}
	return ts, release, nil
}

// noteWriter makes a transcript note of each line written to it (what
// an MCP server says on stderr). It is safe for concurrent use.
type noteWriter struct {
	tr            *transcript
	label, prefix string

	mu      sync.Mutex
	partial []byte
}

func (w *noteWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(w.partial[:i])); line != "" {
			w.tr.Note(w.label, "%s%s", w.prefix, line)
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

func toolNames(ts []*tools.Tool) string {
	if len(ts) == 0 {
		return "no tools"
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name()
	}
	return plural(len(ts), "tool") + " (" + strings.Join(names, ", ") + ")"
}
