//go:build unix

package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/internal/browser"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// TestUI_Browser loads the live view of a running -team demo in headless
// Chromium, crashes a tool actor with the page's own panic button, and
// reads from the DOM that the restart shows in the tree and in the feed;
// then it takes a screenshot. With INSPECT_SCREENSHOT=path it also writes
// the screenshot there (the README's picture is made so).
func TestUI_Browser(t *testing.T) {
	chromium, err := browser.Find(true)
	if err != nil {
		t.Skipf("headless Chromium is needed and could not be installed (scripts/chromium.sh): %v", err)
	}
	defer leakcheck.VerifyNone(t)
	d := startUIDemo(t, "-team", "-crash", "tool")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := browser.Launch(ctx, chromium, 1400, 900)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Navigate(ctx, d.url+"?session=demo"); err != nil {
		t.Fatal(err)
	}
	// The script follows the event stream: the page is live.
	if _, err := b.WaitFor(ctx, `document.body.dataset.live === "true"`, 20000); err != nil {
		t.Fatal(err)
	}
	// The writer serves only as the lead's tool: its delegation's loop
	// shows under the lead's writer tool (ended, kept for the crash -crash
	// tool made in it), and no loop of its own under the runtime.
	const writerLoop = "polyweave/lead/tool-writer/writer"
	shown := `(() => { const n = document.querySelector('li.node[data-id="` + writerLoop + `"]');
  return !!n && n.dataset.role === "agent loop" && n.dataset.state === "stopped" &&
    document.querySelectorAll('li.node[data-role="agent"]').length === 1 &&
    !!document.querySelector('li.node[data-role="agent"][data-id="polyweave/lead"]'); })()`
	if _, err := b.WaitFor(ctx, shown, 10000); err != nil {
		var html string
		_ = b.Eval(ctx, `document.getElementById("tree").innerHTML`, &html)
		t.Fatalf("want the lead alone as an agent and the writer's delegation loop under its tool: %v\ntree:\n%s", err, html)
	}
	// The victim: the lead's reviewer tool, a sibling of the writer tool
	// whose ended delegation stays in sight.
	const victim = "polyweave/lead/tool-reviewer"
	node := `document.querySelector('li.node[data-id="` + victim + `"]')`
	restarts, err := b.WaitFor(ctx, node+` && `+node+`.dataset.restarts`, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if restarts != `"0"` {
		t.Fatalf("%s shows %s restarts before the crash, want 0", victim, restarts)
	}
	// Earlier crashes are in the feed already (-crash tool): count this
	// actor's restart items only.
	feed := `document.querySelectorAll('#feed li[data-kind="restart"][data-actor="` + victim + `"]').length`
	var before int
	if err := b.Eval(ctx, feed, &before); err != nil || before != 0 {
		t.Fatalf("restart items for %s before the crash: %d, %v", victim, before, err)
	}

	// A person clicks the panic button of the lead's reviewer tool.
	click := `(() => { const b = document.querySelector('button[data-fault="panic"][data-actor="` + victim + `"]');
  if (!b) throw new Error("no panic button for ` + victim + `"); b.click(); return true; })()`
	if err := b.Eval(ctx, click, nil); err != nil {
		t.Fatal(err)
	}

	// The page says what it did, and the restart shows in the tree and in
	// the feed.
	if note, err := b.WaitFor(ctx, `document.getElementById("note").textContent`, 10000); err != nil || !strings.Contains(note, "panic injected into "+victim) {
		t.Fatalf("note %s, %v", note, err)
	}
	if _, err := b.WaitFor(ctx, node+` && `+node+`.dataset.restarts === "1" && `+node+`.dataset.state === "running" && `+node+`.classList.contains("flash")`, 10000); err != nil {
		var html string
		_ = b.Eval(ctx, `document.getElementById("tree").innerHTML`, &html)
		t.Fatalf("%v\ntree:\n%s", err, html)
	}
	if _, err := b.WaitFor(ctx, feed+` >= 1`, 10000); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitFor(ctx, shown, 10000); err != nil {
		t.Fatalf("the writer's delegation after the reviewer tool's restart: %v", err)
	}
	var failure string
	if err := b.Eval(ctx, node+`.querySelector(".failure").textContent`, &failure); err != nil || !strings.Contains(failure, "injected from the inspector") {
		t.Fatalf("the node's last failure %q, %v", failure, err)
	}

	shot, err := b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 800 || r.Dy() < 600 {
		t.Fatalf("screenshot of %v, want the 1400×900 window", r)
	}
	path := filepath.Join(t.TempDir(), "inspector.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot file: %v", err)
	}
	if out := os.Getenv("INSPECT_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.stop(); err != nil {
		t.Fatalf("the demo: %v", err)
	}
}
