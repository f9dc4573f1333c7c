package workspace

import (
	"strings"
	"testing"
)

// On Windows a command line holds at most 32767 UTF-16 code units with
// its NUL: `shell -c command`, each argument quoted as Go's os/exec
// quotes it, must fit, or the command is refused before anything
// starts; elsewhere the limit is the kernel's on one argument, in bytes.
func TestCommandLimit(t *testing.T) {
	const gitSh = `C:\Program Files\Git\bin\sh.exe` // quoted: it has a space
	shLine := len(`"C:\Program Files\Git\bin\sh.exe" -c `)
	for _, c := range []struct {
		name, goos, shell, command string
		size, max                  int
	}{
		{"unix, plain", "linux", "/bin/sh", "echo hi", 7, MaxCommandBytes},
		{"unix, at the limit", "darwin", "/bin/sh", strings.Repeat("x", MaxCommandBytes), MaxCommandBytes, MaxCommandBytes},
		{"windows, plain", "windows", gitSh, strings.Repeat("x", 100), shLine + 100, MaxWindowsCommandLine},
		{"windows, spaces quote it", "windows", gitSh, "echo hi", shLine + len(`"echo hi"`), MaxWindowsCommandLine},
		{"windows, quotes escaped", "windows", gitSh, `echo "a\"b"`, shLine + len(`"echo \"a\\\"b\""`), MaxWindowsCommandLine},
		{"windows, trailing backslashes doubled in quotes", "windows", gitSh, `ls C:\dir\\`, shLine + len(`"ls C:\dir\\\\"`), MaxWindowsCommandLine},
		{"windows, backslashes alone kept", "windows", gitSh, `C:\dir\\`, shLine + len(`C:\dir\\`), MaxWindowsCommandLine},
		{"windows, empty argument", "windows", "sh", "", len(`sh -c ""`), MaxWindowsCommandLine},
		{"windows, UTF-16 units", "windows", "sh", "é😀", len(`sh -c `) + 1 + 2, MaxWindowsCommandLine},
	} {
		t.Run(c.name, func(t *testing.T) {
			size, max, _ := commandLimit(c.goos, c.shell, c.command)
			if size != c.size || max != c.max {
				t.Errorf("commandLimit = %d of at most %d, want %d of at most %d", size, max, c.size, c.max)
			}
		})
	}

	// 40 000 bytes fit one argument of Linux, not a Windows command line,
	// which run_command refuses before it starts anything, saying why.
	long := "echo " + strings.Repeat("x", 40000)
	if rf := checkCommand("linux", "/bin/sh", long); rf != nil {
		t.Errorf("linux refuses 40 000 bytes: %+v", rf)
	}
	rf := checkCommand("windows", gitSh, long)
	if rf == nil || rf.Reason != ReasonCommandTooLong || !strings.Contains(rf.Error, "Windows") ||
		!strings.Contains(rf.Error, "32766") {
		t.Errorf("windows, 40 000 bytes: %+v, want refused as too long for a Windows command line", rf)
	}
	if rf != nil && strings.Contains(rf.Error, gitSh) {
		t.Errorf("windows, 40 000 bytes: %q names the host's shell", rf.Error)
	}
	if rf := checkCommand("windows", gitSh, "echo "+strings.Repeat("x", MaxWindowsCommandLine-shLine-len(`"echo "`))); rf != nil {
		t.Errorf("windows, a command line of MaxWindowsCommandLine: %+v", rf)
	}
}
