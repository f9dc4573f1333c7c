package workspace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/polyweave/polyweave-go/workspace"
)

// A workspace confines reads and writes to its root; results marshal to
// the seed's JSON shapes.
func Example() {
	dir, err := os.MkdirTemp("", "workspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ws, err := workspace.New(dir, &workspace.Options{AllowedExtensions: []string{".md"}})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	ctx := context.Background()

	wrote, _ := ws.WriteFile(ctx, workspace.WriteFileInput{Path: "notes/todo.md", Content: "- ship it\n"})
	read, _ := ws.ReadFile(ctx, workspace.ReadFileInput{Path: "notes/todo.md"})
	escape, _ := ws.ReadFile(ctx, workspace.ReadFileInput{Path: "../etc/passwd"})

	for _, r := range []any{wrote, read, escape} {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	// Output:
	// {"success":true,"path":"notes/todo.md","bytes":10}
	// {"success":true,"path":"notes/todo.md","content":"- ship it\n","bytes":10}
	// {"success":false,"error":"read_file \"../etc/passwd\": path escapes the workspace root","path":"../etc/passwd"}
}

// The host lists the places commands' sandboxes hide because a link at
// a path to hide led there, and forgets those it knows hold no secret.
func ExampleWorkspace_ForgetLinkTargets() {
	dir, err := os.MkdirTemp("", "workspace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ws, err := workspace.New(dir, &workspace.Options{HidePaths: []string{dir + "/.env"}})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()

	// ... commands run; one made .env a link to src, and removed it ...
	for _, place := range ws.LinkTargets() {
		// The host wrote no .env while the link stood: nothing secret
		// is there, and commands may see it again.
		fmt.Println("hidden because a link led there:", place)
		ws.ForgetLinkTargets(place)
	}
	fmt.Println(len(ws.LinkTargets()))
	// Output: 0
}
