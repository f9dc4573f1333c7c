//go:build linux && arm64

package sandbox

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	x32Bit    = 0
)

// arm64 has only the *at forms of these system calls.
const (
	sysChmod = -1
	sysOpen  = -1
	sysCreat = -1
	sysMknod = -1
)

// cloneFlagsArg is the argument of clone(2) that holds its flags.
const cloneFlagsArg = 0
