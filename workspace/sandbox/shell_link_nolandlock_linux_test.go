package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without Landlock a command may run a program from anywhere it sees,
// but a link a command leaves in the workspace still makes the next
// opening hide where it leads, unless that is a system place
// (ReadableDirs, where the links of EtcLinkDirs lead): a shell kept
// elsewhere (/srv/tools/sh) ran, until a command's ln -s /srv/tools sec
// (with sec/* hidden) hid it from every later sandbox. CheckRunnable
// refuses such a shell up front, with Landlock or without: a shell
// runs only from where no command's link can hide it.
func TestShellOutsideSystemPlacesRefusedWithoutLandlock(t *testing.T) {
	ws := filepath.Join(shmDir(t), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(dirOutsideTmp(t), "tools")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	shell := filepath.Join(tools, "sh")
	if err := os.WriteFile(shell, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	hide := filepath.Join(ws, "sec", "*")
	run := func(command string) (string, error) {
		cfg := resolvedConfig(t, ws, hide)
		cfg.WithoutLandlock = true
		return runShell(cfg, ws, shell, command)
	}
	cfg := resolvedConfig(t, ws, hide)
	cfg.WithoutLandlock = true
	root, _ := openRootAndNull(t, ws)
	prot, err := Probe(cfg, root)
	if err != nil || prot.Landlock != 0 {
		t.Fatalf("Probe without Landlock: %v, Landlock %d", err, prot.Landlock)
	}
	accepted := prot.CheckRunnable(shell, ws) == nil
	// What accepting it means: a command's link hides it from every
	// later opening.
	if out, err := run("ln -s " + tools + " sec && echo planted"); !strings.Contains(out, "planted") {
		t.Fatalf("the shell outside the system places did not run without Landlock: %q %v", out, err)
	}
	out, err := run("echo ran")
	if strings.Contains(out, "ran") {
		t.Fatalf("the link did not hide the shell from the next opening (%v): nothing to guard", err)
	}
	if accepted {
		t.Errorf("CheckRunnable accepted %s without Landlock, which a command's link then hid: %v", shell, err)
	}
	// The system's shell stays: no command's link hides it.
	if err := prot.CheckRunnable("/bin/sh", ws); err != nil {
		t.Errorf("CheckRunnable(/bin/sh) without Landlock: %v", err)
	}
}
