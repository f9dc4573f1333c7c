//go:build !linux

package workspace

// sysCalls holds no system call here: the calls tests replace are
// Linux's (see paths_linux.go).
type sysCalls struct{}
