//go:build unix

// Package browser drives a headless Chromium over the Chrome DevTools
// Protocol for tests that look at a page as a person would: load it,
// click, read the DOM, take a screenshot. It speaks the few CDP methods
// those need (Page.navigate, Runtime.evaluate, Page.captureScreenshot)
// over one WebSocket; nothing else of CDP is wrapped.
//
// Chromium is Debian's chromium package: scripts/chromium.sh installs it
// when it is missing. [Find] says where it is, or why it is not there.
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/coder/websocket"
)

// Find returns the path of the Chromium binary: $CHROMIUM when set, else
// chromium or chromium-browser on $PATH. When there is none and install
// is set, it runs the module's scripts/chromium.sh (root and apt-get
// needed) and looks again. The error says why there is none.
func Find(install bool) (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	look := func() (string, error) {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				return p, nil
			}
		}
		return "", errors.New("no chromium on $PATH (and $CHROMIUM unset)")
	}
	p, err := look()
	if err == nil || !install {
		return p, err
	}
	script, serr := installScript()
	if serr != nil {
		return "", fmt.Errorf("%v; %v", err, serr)
	}
	out, ierr := exec.Command("bash", script).CombinedOutput()
	if ierr != nil {
		return "", fmt.Errorf("%v; %s failed: %v: %s", err, script, ierr, lastLines(string(out), 5))
	}
	return look()
}

// installScript is scripts/chromium.sh of this module.
func installScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot find scripts/chromium.sh")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "chromium.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("cannot find scripts/chromium.sh: %w", err)
	}
	return p, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Browser is a headless Chromium with one page. Its methods are not safe
// for concurrent use.
type Browser struct {
	cmd  *exec.Cmd
	dir  string
	conn *websocket.Conn
	seq  int
	wait sync.WaitGroup
}

// Launch starts Chromium (path from [Find]) headless with a window of
// width × height CSS pixels, on about:blank, and connects to its page.
// Close stops it.
func Launch(ctx context.Context, path string, width, height int) (*Browser, error) {
	dir, err := os.MkdirTemp("", "polyweave-chromium-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--user-data-dir="+dir, fmt.Sprintf("--window-size=%d,%d", width, height), "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close kills its helper processes too
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: start %s: %w", path, err)
	}
	b := &Browser{cmd: cmd, dir: dir}
	// Chromium says where its DevTools listen on stderr; the rest of
	// stderr is drained until it exits.
	found := make(chan string, 1)
	b.wait.Add(1)
	go func() {
		defer b.wait.Done()
		sc := bufio.NewScanner(stderr)
		var seen []string
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "DevTools listening on "); ok {
				found <- strings.TrimSpace(rest)
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
			seen = append(seen, line)
		}
		found <- "error: " + lastLines(strings.Join(seen, "\n"), 5)
	}()
	var ws string
	select {
	case ws = <-found:
	case <-ctx.Done():
		b.Close()
		return nil, fmt.Errorf("browser: no DevTools address: %w", ctx.Err())
	}
	if msg, ok := strings.CutPrefix(ws, "error: "); ok {
		b.Close()
		return nil, fmt.Errorf("browser: chromium exited without DevTools: %s", msg)
	}
	page, err := pageURL(ctx, ws)
	if err != nil {
		b.Close()
		return nil, err
	}
	if b.conn, _, err = websocket.Dial(ctx, page, nil); err != nil {
		b.Close()
		return nil, fmt.Errorf("browser: connect to the page: %w", err)
	}
	b.conn.SetReadLimit(64 << 20) // screenshots
	return b, nil
}

// pageURL finds the WebSocket of the page target from the browser's
// DevTools address (ws://127.0.0.1:PORT/devtools/browser/ID).
func pageURL(ctx context.Context, browserWS string) (string, error) {
	rest, ok := strings.CutPrefix(browserWS, "ws://")
	if !ok {
		return "", fmt.Errorf("browser: unexpected DevTools address %q", browserWS)
	}
	host, _, _ := strings.Cut(rest, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/json/list", nil)
	if err != nil {
		return "", err
	}
	req.Close = true // no idle connection left behind
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("browser: list targets: %w", err)
	}
	defer resp.Body.Close()
	var targets []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		return "", fmt.Errorf("browser: list targets: %w", err)
	}
	for _, t := range targets {
		if t.Type == "page" && t.WS != "" {
			return t.WS, nil
		}
	}
	return "", errors.New("browser: no page target")
}

// call sends one CDP command and returns its result, skipping the
// events that come before it.
func (b *Browser) call(ctx context.Context, method string, params any, result any) error {
	b.seq++
	id := b.seq
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if err := b.conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("browser: %s: %w", method, err)
	}
	for {
		_, data, err := b.conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("browser: %s: %w", method, err)
		}
		var reply struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
				Data    string `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &reply); err != nil {
			return fmt.Errorf("browser: %s: %w", method, err)
		}
		if reply.ID != id {
			continue // an event
		}
		if reply.Error != nil {
			return fmt.Errorf("browser: %s: %s %s", method, reply.Error.Message, reply.Error.Data)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(reply.Result, result)
	}
}

// Navigate loads url in the page (it returns once the navigation was
// committed; wait for what the page shows with [Browser.Eval]).
func (b *Browser) Navigate(ctx context.Context, url string) error {
	var out struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": url}, &out); err != nil {
		return err
	}
	if out.ErrorText != "" {
		return fmt.Errorf("browser: navigate to %s: %s", url, out.ErrorText)
	}
	return nil
}

// Eval evaluates the JavaScript expression in the page, awaiting it when
// it is a promise, and decodes its value (JSON) into result (nil: drop
// it). A thrown exception or rejected promise is an error.
func (b *Browser) Eval(ctx context.Context, expr string, result any) error {
	var out struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}
	if err := b.call(ctx, "Runtime.evaluate", params, &out); err != nil {
		return err
	}
	if out.Exception != nil {
		return fmt.Errorf("browser: %s %s", out.Exception.Text, out.Exception.Exception.Description)
	}
	if result == nil || len(out.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(out.Result.Value, result)
}

// WaitFor evaluates the JavaScript condition in the page every 50 ms
// (timed by the page) until it is truthy, and returns its value as JSON
// text; it fails after timeoutMS with what the condition last gave.
func (b *Browser) WaitFor(ctx context.Context, cond string, timeoutMS int) (string, error) {
	expr := fmt.Sprintf(`new Promise((resolve, reject) => {
  const deadline = Date.now() + %d;
  const check = () => {
    let v;
    try { v = (%s); } catch (e) { v = undefined; }
    if (v) { resolve(JSON.stringify(v)); return; }
    if (Date.now() > deadline) { reject(new Error("timed out waiting for: " + %q)); return; }
    setTimeout(check, 50);
  };
  check();
})`, timeoutMS, cond, cond)
	var out string
	err := b.Eval(ctx, expr, &out)
	return out, err
}

// Screenshot returns a PNG of the page's viewport.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	var out struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &out); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(out.Data)
}

// Close stops Chromium and removes its profile.
func (b *Browser) Close() {
	if b.conn != nil {
		_ = b.conn.CloseNow()
	}
	if b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	}
	b.wait.Wait()
	_ = b.cmd.Wait()
	// Chromium keeps its singleton socket in a folder of its own in the
	// temporary folder (a socket's path must be short), linked from the
	// profile; killed, it leaves that folder behind.
	if socket, err := os.Readlink(filepath.Join(b.dir, "SingletonSocket")); err == nil {
		if d := filepath.Dir(socket); strings.HasPrefix(filepath.Base(d), "org.chromium.Chromium.") {
			_ = os.RemoveAll(d)
		}
	}
	_ = os.RemoveAll(b.dir)
}
