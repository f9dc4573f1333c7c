package workspace

import "github.com/polyweave/polyweave-go/tools"

// Tools binds the read_file, write_file and run_command tools of ws as
// typed tools (package tools), their schemas inferred from the
// workspace's input types. write_file has the "write" capability;
// run_command has "execute", is irreversible and has no tool timeout of
// its own: the workspace enforces its command timeout and kills the
// command (its whole sandbox, or its process group), and a CANCEL still
// cancels the call. When the sandbox makes commands die with their host,
// run_command is DiesWithProcess: a durable loop resuming after a crash
// says the interrupted command was certainly stopped.
//
// It lives here, not in package tools, so that package tools builds on
// every system.
func Tools(ws *Workspace) ([]*tools.Tool, error) {
	read, err := tools.NewTyped(tools.Definition{Name: ReadFileToolName, Description: ReadFileDescription,
		Idempotent: true}, ws.ReadFile)
	if err != nil {
		return nil, err
	}
	write, err := tools.NewTyped(tools.Definition{Name: WriteFileToolName, Description: WriteFileDescription,
		Capabilities: []string{"write"}, Idempotent: true}, ws.WriteFile)
	if err != nil {
		return nil, err
	}
	run, err := tools.NewTyped(tools.Definition{Name: RunCommandToolName, Description: RunCommandDescription,
		Capabilities: []string{"execute"}, Irreversible: true, Timeout: tools.NoTimeout,
		DiesWithProcess: ws.Protections().DiesWithHost}, ws.RunCommand)
	if err != nil {
		return nil, err
	}
	return []*tools.Tool{read, write, run}, nil
}
