package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults of the flags.
const (
	defaultAPIKeyEnv     = "OPENAI_API_KEY"
	defaultModel         = "gpt-4o-mini"
	anthropicAPIKeyEnv   = "ANTHROPIC_API_KEY"
	anthropicModel       = "claude-sonnet-4-5"
	defaultMaxIterations = 8
	defaultTimeout       = 2 * time.Minute
	defaultPrompt        = "Write a shell script hello.sh that greets the name it is given, " +
		"run it for Ada saving its output in greeting.txt, then read greeting.txt back and tell me what it says."
)

// config is what the flags ask for. The zero value is not meaningful: it
// comes from parseFlags.
type config struct {
	provider      string // "", "openai" or "anthropic"
	baseURL       string
	model         string
	apiKeyEnv     string
	apiKeyEnvSet  bool // -api-key-env was given explicitly
	modelSet      bool // -model was given explicitly
	prompt        string
	promptSet     bool // -prompt was given explicitly
	workspace     string
	maxIterations int
	timeout       time.Duration
	store         string
	session       string
	crash         crashPoint
	json          bool
	team          bool
	ui            uiFlag        // -ui (ui.go)
	mcp           mcpServers    // -mcp (mcp.go)
	trace         traceFlag     // -trace (trace.go)
	approval      approvalFlags // -approve, -undo (approve.go)
	cluster       clusterFlag   // -cluster (cluster.go)
}

// usageError is a problem with the command line: the demo exits 2.
type usageError struct {
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

const usageIntro = `Usage: demo [flags]

Runs a tool-calling agent on Polyweave and prints what happens, live: what
the model says, each tool call with its arguments, result and timing, and
supervision events, then a one-line summary.

The agent works in a workspace folder with three tools: read_file,
write_file and run_command (sh -c, inside the workspace). Without -base-url
the model is scripted: it writes hello.sh, runs it, reads its output back
and answers. With -base-url it is a real model behind any OpenAI-compatible
Chat Completions server.

Examples:
  demo                                   scripted agent in a temporary folder
  demo -crash tool                       a tool panics; watch it restart
  demo -json | jq .type                  frames as JSON lines
  demo -team                             a lead agent delegating to two sub-agents
  demo -team -ui 127.0.0.1:8080          the same, watched live in the browser
  demo -cluster -store postgres://…      three member processes; the session's member is killed mid-call and it moves
  demo -base-url http://localhost:11434/v1 -model llama3.1   local Ollama
  demo -base-url https://api.openai.com/v1 -prompt "..."     OpenAI ($OPENAI_API_KEY)
  demo -provider anthropic -prompt "..."                     Anthropic ($ANTHROPIC_API_KEY)
  demo -base-url ... -mcp 'fs=npx -y @modelcontextprotocol/server-filesystem /tmp'   an MCP server's tools too

Flags:
`

// parseFlags reads args. -h prints the usage to stderr and returns
// flag.ErrHelp; a bad flag returns a *usageError.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{crash: crashPoint{}}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	// The flag package prints its errors followed by the whole usage; the
	// demo prints the one-line error itself (exitCode) and the usage only
	// for -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&cfg.baseURL, "base-url", "",
		"API root of an OpenAI-compatible server, usually ending in /v1\n"+
			"(Ollama http://localhost:11434/v1, vLLM http://localhost:8000/v1);\n"+
			"empty runs the embedded scripted model")
	fs.StringVar(&cfg.provider, "provider", "",
		"model API: openai (any OpenAI-compatible server; the default with -base-url)\n"+
			"or anthropic (the Messages API; -base-url defaults to Anthropic's, the key\n"+
			"to $ANTHROPIC_API_KEY, which Anthropic's API needs, and -model to "+anthropicModel+")")
	fs.StringVar(&cfg.model, "model", defaultModel, "model name sent to the server (with -base-url)")
	fs.StringVar(&cfg.apiKeyEnv, "api-key-env", defaultAPIKeyEnv,
		"name of the environment variable holding the API key (with -base-url);\n"+
			"when the default variable is unset no key is sent, as local servers expect\n"+
			"(api.openai.com needs one)")
	fs.StringVar(&cfg.prompt, "prompt", defaultPrompt,
		"what the user asks the agent (the scripted model answers its script whatever the prompt)")
	fs.StringVar(&cfg.workspace, "workspace", "",
		"existing folder the agent works in, kept afterwards;\n"+
			"empty uses a fresh temporary folder, removed at exit")
	fs.IntVar(&cfg.maxIterations, "max-iterations", defaultMaxIterations,
		"tool rounds after which the model is told to answer without tools")
	fs.DurationVar(&cfg.timeout, "timeout", defaultTimeout,
		"bound on the whole run; when it passes the run stops and fails")
	fs.StringVar(&cfg.store, "store", "",
		"bbolt file (created if missing) that makes the session durable: the tool\n"+
			"loop persists it at every step, and a run that was killed, crashed or\n"+
			"timed out resumes with -session; without -workspace the session works\n"+
			"in <store>.files/<session>")
	fs.StringVar(&cfg.session, "session", "",
		"with -store: the session to resume (it goes on with the prompt it was\n"+
			"started with), or to start under this id (letters, digits, and '.', '_'\n"+
			"or '-' after the first: it names a folder); default: a new id, printed")
	fs.Var(&cfg.crash, "crash",
		"inject one real panic at `site[:N]` to watch supervision heal it: tool (the\n"+
			"handler of the Nth tool call, default 2), loop (the tool loop as it reports\n"+
			"the Nth tool result, default 2; router is a synonym) or model (the model\n"+
			"adapter as it emits its Nth frame, default 14)")
	cfg.ui.register(fs)
	cfg.trace.register(fs)
	cfg.approval.register(fs)
	cfg.cluster.register(fs)
	fs.BoolVar(&cfg.team, "team", false,
		"run a team instead of one agent: a lead agent that delegates to a writer\n"+
			"agent (the workspace tools; where -crash strikes) and a reviewer agent\n"+
			"(read_file only), each given to the lead as a tool")
	fs.Var(&cfg.mcp, "mcp", mcpUsage)
	fs.BoolVar(&cfg.json, "json", false,
		"print each frame the agent emits as one JSON line (protojson) on stdout;\n"+
			"notes and the summary go to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprint(stderr, usageIntro)
			fs.PrintDefaults()
			return cfg, err
		}
		return cfg, &usageError{err: err}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "api-key-env":
			cfg.apiKeyEnvSet = true
		case "model":
			cfg.modelSet = true
		case "prompt":
			cfg.promptSet = true
		}
	})
	return cfg, cfg.validate(fs.Args())
}

func (cfg *config) validate(rest []string) error {
	bad := func(format string, a ...any) error { return &usageError{err: fmt.Errorf(format, a...)} }
	if err := cfg.approval.check(cfg.team); err != nil {
		return err
	}
	switch cfg.provider {
	case "", "openai":
	case "anthropic":
		if !cfg.apiKeyEnvSet {
			cfg.apiKeyEnv = anthropicAPIKeyEnv
		}
		if !cfg.modelSet {
			cfg.model = anthropicModel
		}
	default:
		return bad("-provider %q: want openai or anthropic", cfg.provider)
	}
	switch {
	case len(rest) > 0:
		return bad("unexpected argument %q (give the prompt with -prompt)", rest[0])
	case strings.TrimSpace(cfg.prompt) == "":
		return bad("-prompt is empty")
	case cfg.maxIterations < 1:
		return bad("-max-iterations must be at least 1, not %d", cfg.maxIterations)
	case cfg.timeout <= 0:
		return bad("-timeout must be positive, not %v", cfg.timeout)
	case cfg.session != "" && cfg.store == "":
		return bad("-session needs -store (the file the session lives in)")
	case cfg.session != "" && !validSessionID(cfg.session):
		return bad("-session %q: a session id is 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit (it names the folder <store>.files/ID)",
			cfg.session, maxSessionID)
	case cfg.baseURL != "" && cfg.model == "":
		return bad("-model is empty")
	case cfg.apiKeyEnv == "":
		return bad("-api-key-env is empty")
	case cfg.apiKeyEnvSet && (cfg.baseURL != "" || cfg.provider == "anthropic") && os.Getenv(cfg.apiKeyEnv) == "":
		return bad("-api-key-env %s: that environment variable is unset or empty (leave -api-key-env out to send no key)", cfg.apiKeyEnv)
	case cfg.provider == "anthropic" && cfg.baseURL == "" && os.Getenv(cfg.apiKeyEnv) == "":
		// Anthropic's own API refuses every request without a key.
		return bad("-provider anthropic: $%s is unset or empty, and Anthropic's API needs a key (-api-key-env names another variable; -base-url a server of your own)", cfg.apiKeyEnv)
	case cfg.provider != "anthropic" && isOpenAIAPI(cfg.baseURL) && os.Getenv(cfg.apiKeyEnv) == "":
		return bad("-base-url %s: $%s is unset or empty, and OpenAI's API needs a key (-api-key-env names another variable)", cfg.baseURL, cfg.apiKeyEnv)
	case isPostgres(cfg.store) && !cfg.cluster.on:
		return bad("-store %s: only -cluster keeps sessions in PostgreSQL; without -cluster -store is a bbolt file path", cfg.store)
	}
	if cfg.workspace != "" {
		if st, err := os.Stat(cfg.workspace); err != nil || !st.IsDir() {
			return bad("-workspace %s is not an existing folder", cfg.workspace)
		}
	}
	if cfg.baseURL == "" && cfg.provider == "" && cfg.crash.site == crashModel {
		who, frames := "the scripted model emits", scriptedModelFrames
		if cfg.team {
			who, frames = "the scripted writer's model emits", scriptedWriterFrames
		}
		if cfg.crash.n > frames {
			return bad("-crash %s would never fire: %s %d frames", cfg.crash.String(), who, frames)
		}
	}
	if cfg.baseURL == "" && (cfg.crash.site == crashTool || cfg.crash.site == crashLoop) {
		raw, who := defaultScript, "the scripted model makes"
		if cfg.team {
			var err error
			if raw, err = teamScript("writer"); err != nil {
				return err
			}
			who = "the scripted writer makes"
		}
		script, err := loadScript(raw)
		if err != nil {
			return err
		}
		calls := 0
		for _, turn := range script.Turns {
			calls += len(turn.ToolCalls)
		}
		if cfg.crash.n > calls {
			return bad("-crash %s would never fire: %s %d tool calls", cfg.crash.String(), who, calls)
		}
	}
	return nil
}

// How many frames the scripted models emit in a whole run: the embedded
// script's, and the team writer's (where -team's crash strikes). A
// -crash model:N beyond them would never fire. TestRun_CrashModelBound
// checks them against real runs.
const (
	scriptedModelFrames  = 27
	scriptedWriterFrames = 19
)

// crashSite is where -crash injects its panic.
type crashSite string

const (
	crashNone  crashSite = ""
	crashTool  crashSite = "tool"
	crashLoop  crashSite = "loop"
	crashModel crashSite = "model"
)

// crashPoint is the value of -crash: a site and which occurrence there
// panics (the nth tool call, tool result or model frame, from 1).
type crashPoint struct {
	site crashSite
	n    int
}

// defaultCrashAt is the occurrence -crash picks when none is given: in the
// embedded script, the run_command call, its result, and a frame in the
// middle of the model's second answer.
var defaultCrashAt = map[crashSite]int{crashTool: 2, crashLoop: 2, crashModel: 14}

func (p *crashPoint) String() string {
	if p == nil || p.site == crashNone {
		return ""
	}
	return fmt.Sprintf("%s:%d", p.site, p.n)
}

// Set parses site[:n].
func (p *crashPoint) Set(s string) error {
	name, num, hasNum := strings.Cut(s, ":")
	site := crashSite(name)
	if site == "router" {
		site = crashLoop
	}
	if _, ok := defaultCrashAt[site]; !ok {
		return fmt.Errorf("unknown crash site %q: want tool, loop (or router) or model, optionally with :N", name)
	}
	n := defaultCrashAt[site]
	if hasNum {
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return fmt.Errorf("crash point %q: N must be a whole number from 1", s)
		}
		n = v
	}
	*p = crashPoint{site: site, n: n}
	return nil
}

// isOpenAIAPI says whether baseURL is OpenAI's own API, which refuses
// every request without a key (local servers take none).
func isOpenAIAPI(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// maxSessionID is the longest session id -session takes.
const maxSessionID = 128

// validSessionID says whether id can name a session's folder under
// <store>.files/ (or the -cluster root): one path element, never "." or
// "..", so the workspace stays inside the folder the README promises.
func validSessionID(id string) bool {
	if id == "" || len(id) > maxSessionID {
		return false
	}
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}
