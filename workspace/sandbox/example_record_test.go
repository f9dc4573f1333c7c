package sandbox_test

import (
	"fmt"
	"os"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A program that sets sandboxes up itself records, before each set-up,
// what the patterns to hide match by then, so that a command moving it
// refuses the next set-ups rather than show it.
func ExampleRecordMatches() {
	ws := "/srv/project" // resolved
	cfg, err := sandbox.Config{Hide: []string{ws + "/*.key"}}.WithDefaults()
	if err == nil {
		cfg.Resolved, err = sandbox.ResolveHide(cfg.Hide, ws)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	root, err := os.Open(ws)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()
	for _, command := range []string{"ls", "make"} {
		cfg.Resolved = sandbox.RecordMatches(cfg.Resolved, ws)
		p, err := sandbox.Start(cfg, root, "/bin/sh", command, nil, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Println(err) // ErrHiddenMoved once a command moved a match
			return
		}
		_, _ = p.Finish()
	}
}
