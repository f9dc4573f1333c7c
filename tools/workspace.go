package tools

import "github.com/polyweave/polyweave-go/workspace"

// WorkspaceTools binds the read_file, write_file and run_command tools of
// ws (see package workspace) as typed tools, their schemas inferred from
// the workspace's input types. write_file has the "write" capability;
// run_command has "execute", is irreversible and has no tool timeout of its
// own: the workspace enforces its command timeout and kills the command's
// process group, and a CANCEL still cancels the call.
func WorkspaceTools(ws *workspace.Workspace) ([]*Tool, error) {
	read, err := NewTyped(Definition{Name: workspace.ReadFileToolName, Description: workspace.ReadFileDescription,
		Idempotent: true}, ws.ReadFile)
	if err != nil {
		return nil, err
	}
	write, err := NewTyped(Definition{Name: workspace.WriteFileToolName, Description: workspace.WriteFileDescription,
		Capabilities: []string{"write"}, Idempotent: true}, ws.WriteFile)
	if err != nil {
		return nil, err
	}
	run, err := NewTyped(Definition{Name: workspace.RunCommandToolName, Description: workspace.RunCommandDescription,
		Capabilities: []string{"execute"}, Irreversible: true, Timeout: NoTimeout}, ws.RunCommand)
	if err != nil {
		return nil, err
	}
	return []*Tool{read, write, run}, nil
}
