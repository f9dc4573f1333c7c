//go:build linux

package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter the helper installs on the thread it forks the
// command from (the command inherits it). It refuses what the other
// layers do not stop:
//
//   - socket(2) for any family but AF_INET and AF_INET6 when the
//     network is not allowed: named Unix sockets (a host daemon's,
//     /var/run/docker.sock say) are reachable through any path the
//     sandbox can see, and Landlock has no rule for connecting to them;
//     netlink, packet, vsock and the rest are no part of "no network".
//     socketpair(2) stays allowed for stream and sequenced-packet
//     pairs: they are connected, reach nothing outside, and pipelines
//     and process pools need them. A datagram pair is refused: each of
//     its sockets can send to any named datagram socket by path.
//   - new namespaces: unshare(2) and clone(2) with any CLONE_NEW* flag.
//     Each user namespace counts against the host user's quota, which a
//     command could exhaust for every other sandbox of that user; and
//     in a user namespace of its own the command gets back every
//     capability, CAP_NET_ADMIN over a network stack of its own (the
//     kernel's packet filter code) among them. clone3(2) carries its
//     flags in a structure a filter cannot read: it fails with ENOSYS,
//     which makes the C library fall back to clone(2).
//   - io_uring, which can open sockets and files without the system
//     calls this filter inspects;
//   - keyctl, add_key and request_key: the kernel's keyrings are not
//     namespaced by the sandbox's namespaces;
//   - setting the set-user-ID or set-group-ID bit on a file (chmod, and
//     the mode of a file being created): the command's root is the
//     host's user, so such a file left in the workspace would run as
//     that user for whoever executes it outside. openat2(2) carries its
//     mode in a structure a filter cannot read: it fails with ENOSYS,
//     which makes the C library fall back to openat(2).
//
// A system call of another architecture (a 32-bit one on a 64-bit
// kernel) kills the process: the numbers above would not apply to it.

// seccompRule is one system call the filter inspects; nr < 0 means the
// call does not exist on this architecture.
type seccompRule struct {
	nr   int
	body func(a *bpfAsm)
}

// setuidBits are S_ISUID and S_ISGID.
const setuidBits = unix.S_ISUID | unix.S_ISGID

// oTmpfile is __O_TMPFILE, the bit O_TMPFILE adds to O_DIRECTORY: a
// file it creates takes the call's mode as O_CREAT's does.
const oTmpfile = unix.O_TMPFILE &^ unix.O_DIRECTORY

// newNamespaces are the CLONE_NEW* flags of clone(2); unshare(2) also
// takes CLONE_NEWTIME, which clone(2) reads as part of the exit signal.
const newNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompRules lists the rules for a sandbox whose network is allowed
// or not.
func seccompRules(allowNetwork bool) []seccompRule {
	eperm := func(a *bpfAsm) { a.jump(lblEPERM) }
	mode := func(arg int) func(a *bpfAsm) {
		return func(a *bpfAsm) {
			a.loadArg(arg)
			a.jset(setuidBits, lblEPERM, lblAllow)
		}
	}
	create := func(flagsArg, modeArg int) func(a *bpfAsm) {
		return func(a *bpfAsm) {
			a.loadArg(flagsArg)
			a.jset(unix.O_CREAT|oTmpfile, "", lblAllow)
			a.loadArg(modeArg)
			a.jset(setuidBits, lblEPERM, lblAllow)
		}
	}
	rules := []seccompRule{
		{unix.SYS_IO_URING_SETUP, eperm},
		{unix.SYS_IO_URING_ENTER, eperm},
		{unix.SYS_IO_URING_REGISTER, eperm},
		{unix.SYS_KEYCTL, eperm},
		{unix.SYS_ADD_KEY, eperm},
		{unix.SYS_REQUEST_KEY, eperm},
		{unix.SYS_FCHMOD, mode(1)},
		{unix.SYS_FCHMODAT, mode(2)},
		{unix.SYS_FCHMODAT2, mode(2)},
		{unix.SYS_OPENAT, create(2, 3)},
		{unix.SYS_MKNODAT, mode(2)},
		{unix.SYS_OPENAT2, func(a *bpfAsm) { a.jump(lblENOSYS) }},
		{sysChmod, mode(1)},
		{sysOpen, create(1, 2)},
		{sysCreat, mode(1)},
		{sysMknod, mode(1)},
		{unix.SYS_UNSHARE, func(a *bpfAsm) {
			a.loadArg(0)
			a.jset(newNamespaces|unix.CLONE_NEWTIME, lblEPERM, lblAllow)
		}},
		{unix.SYS_CLONE, func(a *bpfAsm) {
			a.loadArg(cloneFlagsArg)
			a.jset(newNamespaces, lblEPERM, lblAllow)
		}},
		{unix.SYS_CLONE3, func(a *bpfAsm) { a.jump(lblENOSYS) }},
	}
	if !allowNetwork {
		rules = append(rules, seccompRule{unix.SYS_SOCKET, func(a *bpfAsm) {
			a.loadArg(0)
			a.jeq(unix.AF_INET, lblAllow, "")
			a.jeq(unix.AF_INET6, lblAllow, lblEPERM)
		}}, seccompRule{unix.SYS_SOCKETPAIR, func(a *bpfAsm) {
			a.loadArg(1)
			a.and(^uint32(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC))
			a.jeq(unix.SOCK_STREAM, lblAllow, "")
			a.jeq(unix.SOCK_SEQPACKET, lblAllow, lblEPERM)
		}})
	}
	return rules
}

// Labels every filter ends with.
const (
	lblAllow  = "allow"
	lblEPERM  = "eperm"
	lblENOSYS = "enosys"
	lblKill   = "kill"
)

// seccompFilter assembles the filter.
func seccompFilter(allowNetwork bool) ([]unix.SockFilter, error) {
	a := &bpfAsm{labels: map[string]int{}}
	a.load(4) // seccomp_data.arch
	a.jeq(auditArch, "", lblKill)
	a.load(0) // seccomp_data.nr
	if x32Bit != 0 {
		a.jge(x32Bit, lblKill, "")
	}
	var rules []seccompRule
	for _, r := range seccompRules(allowNetwork) {
		if r.nr >= 0 {
			rules = append(rules, r)
		}
	}
	for i, r := range rules {
		a.jeq(uint32(r.nr), fmt.Sprint("rule", i), "")
	}
	a.ret(unix.SECCOMP_RET_ALLOW)
	for i, r := range rules {
		a.label(fmt.Sprint("rule", i))
		r.body(a)
	}
	a.label(lblAllow)
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label(lblEPERM)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.label(lblENOSYS)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	a.label(lblKill)
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// installSeccomp installs the filter on the calling thread, which has
// no_new_privs set.
func installSeccomp(allowNetwork bool) error {
	if auditArch == 0 {
		return fmt.Errorf("no filter for this architecture")
	}
	prog, err := seccompFilter(allowNetwork)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
}

// bpfAsm assembles classic BPF with named forward jump targets.
type bpfAsm struct {
	prog   []unix.SockFilter
	fixups []bpfFixup
	labels map[string]int
}

type bpfFixup struct {
	at     int
	jt, jf string // "" = the next instruction
}

func (a *bpfAsm) load(off uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

// loadArg loads the low 32 bits of system call argument i (every
// argument inspected is an int, a mode or flags; the architectures
// with a filter are little-endian).
func (a *bpfAsm) loadArg(i int) { a.load(16 + 8*uint32(i)) }

func (a *bpfAsm) ret(k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

// and masks the accumulator with k.
func (a *bpfAsm) and(k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: k})
}

func (a *bpfAsm) cond(op uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (a *bpfAsm) jeq(k uint32, jt, jf string)  { a.cond(unix.BPF_JEQ, k, jt, jf) }
func (a *bpfAsm) jge(k uint32, jt, jf string)  { a.cond(unix.BPF_JGE, k, jt, jf) }
func (a *bpfAsm) jset(k uint32, jt, jf string) { a.cond(unix.BPF_JSET, k, jt, jf) }

// jump jumps to a label whatever the accumulator holds.
func (a *bpfAsm) jump(to string) { a.jeq(0, to, to) }

func (a *bpfAsm) label(name string) { a.labels[name] = len(a.prog) }

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	for _, f := range a.fixups {
		for _, j := range []struct {
			label string
			skip  *uint8
		}{{f.jt, &a.prog[f.at].Jt}, {f.jf, &a.prog[f.at].Jf}} {
			if j.label == "" {
				continue
			}
			to, ok := a.labels[j.label]
			d := to - f.at - 1
			if !ok || d < 0 || d > 255 {
				return nil, fmt.Errorf("seccomp filter: bad jump to %q", j.label)
			}
			*j.skip = uint8(d)
		}
	}
	return a.prog, nil
}
