//go:build linux && amd64

package sandbox

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	// x32Bit marks the x32 ABI's system calls, which a filter for
	// x86-64 must refuse.
	x32Bit = 0x40000000
)

// System calls that newer architectures only have in their *at form.
const (
	sysChmod = unix.SYS_CHMOD
	sysOpen  = unix.SYS_OPEN
	sysCreat = unix.SYS_CREAT
	sysMknod = unix.SYS_MKNOD
)

// cloneFlagsArg is the argument of clone(2) that holds its flags.
const cloneFlagsArg = 0
