// Command demo runs a tool-calling agent on Polyweave: a tool loop over a
// workspace (read_file, write_file, run_command), every stage a supervised
// actor, printed live as a transcript.
//
// With no flags the model is scripted (the embedded script.json): in a
// fresh temporary workspace it writes a shell script, runs it, reads its
// output back and answers. With -base-url it talks to any OpenAI-compatible
// Chat Completions server instead (OpenAI, Ollama, vLLM, llama.cpp server,
// LM Studio). -crash injects a real panic into a tool, the tool loop or the
// model adapter to show supervision healing it. Run it with -h for the
// flags.
//
// Exit status: 0 when the agent gave its final answer, 1 when the run
// failed, 2 for bad flags.
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode maps run's error to the exit status, printing it to stderr.
func exitCode(err error, stderr io.Writer) int {
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "demo:", err)
		fmt.Fprintln(stderr, "Run 'demo -h' for the flags.")
		return 2
	default:
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
}

// run is the whole program: it parses args, runs the agent and writes its
// transcript to stdout (notes, and with -json everything but the frames,
// to stderr). It returns flag.ErrHelp after -h, a *usageError for bad
// flags, and an error saying what failed when the agent did not finish.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if m := os.Getenv(memberEnv); m != "" { // a member of a -cluster run (cluster.go)
		return runMember(ctx, m, stdout)
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.cluster.on {
		return runCluster(ctx, cfg, stdout, stderr)
	}
	return withDamageHint(cfg, runAgent(ctx, cfg, stdout, stderr))
}

// withDamageHint is err followed by damageHint's commands when err says
// that the -store's data is damaged.
func withDamageHint(cfg config, err error) error {
	if hint := damageHint(cfg.store, err); hint != "" {
		return fmt.Errorf("%w%s", err, hint)
	}
	return err
}
