//go:build linux && !amd64 && !arm64

package sandbox

// No seccomp filter is built for this architecture: Protections says
// it is missing.
const (
	auditArch = 0
	x32Bit    = 0
	sysChmod  = -1
	sysOpen   = -1
	sysCreat  = -1
	sysMknod  = -1

	cloneFlagsArg = 0
)
