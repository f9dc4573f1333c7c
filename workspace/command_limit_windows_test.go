package workspace

import (
	"strings"
	"syscall"
	"testing"
	"unicode/utf16"
)

// commandLimit counts the command line as Go's os/exec builds it on
// Windows: each argument escaped by syscall.EscapeArg, joined by
// blanks, in UTF-16.
func TestCommandLimitMatchesEscapeArg(t *testing.T) {
	for _, command := range []string{"", "echo", "echo hi", `a"b`, `a\"b`, `"a b"`, `C:\x\`, `C:\x y\\`, "tab\there",
		`\\"\\`, "é😀 x", "\xff\xfe", strings.Repeat(`\"`, 100)} {
		for _, shell := range []string{"sh", `C:\Program Files\Git\bin\sh.exe`} {
			line := syscall.EscapeArg(shell) + " -c " + syscall.EscapeArg(command)
			want := len(utf16.Encode([]rune(line)))
			if got, _, _ := commandLimit("windows", shell, command); got != want {
				t.Errorf("commandLimit(%q, %q) = %d, want %d (%s)", shell, command, got, want, line)
			}
		}
	}
}
