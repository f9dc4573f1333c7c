package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// What the sandbox hides whatever the configuration, besides the
// workspace's surroundings (see [Surroundings]): the homes of the
// host's users, the secrets of the system (password hashes, old ones
// too, host and TLS private keys, and the well-known places of other
// credentials only root reads: VPN, IPsec and ACME keys, Kerberos
// keytabs, Wi-Fi and PPP passwords), its logs, spools and backups, and
// its run-time state (/run): the Unix sockets of its daemons (a
// container engine's, the service manager's, the system bus), which a
// command with the network allowed could otherwise connect to, and the
// credentials handed to services. With the network allowed, the name
// resolver's configuration stays visible where it leads into /run (see
// [KeptWithNetwork]). An entry may be a pattern (filepath.Match, its
// wildcards matching names whatever their case: see [Config.Hide]). A
// hidden path that holds the workspace shows only the directories on
// the way to it.
//
// The host's shared memory (/dev/shm) and message queues (/dev/mqueue)
// are not listed: no sandbox runs without a /dev of its own (the set-up
// fails when one cannot be made), which holds neither of the host's,
// and whose /dev/shm, an empty writable tmpfs of the sandbox's own,
// hiding would only make unusable.
//
// A program may change it before it sets any sandbox up (before
// workspace.New), never after: the host reads it, without locking, as
// it prepares each sandbox, which a workspace does in the background,
// and hands it to the sandbox's helper.
var DefaultHidden = []string{
	"/root", "/home",
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
	"/etc/wireguard", "/etc/letsencrypt", "/etc/ipsec.secrets", "/etc/ipsec.d/private",
	"/etc/krb5.keytab", "/etc/NetworkManager/system-connections",
	"/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets",
	"/var/log", "/var/spool", "/var/backups",
	"/run", "/var/run",
}

// ReadableDirs are the directories, beside the workspace, /tmp and
// /dev/shm, whose files sandboxed commands may read (and execute) when
// Landlock is in force: the system's programs, libraries and
// configuration, the sandbox's own /proc and /dev, and what programs
// read of /sys (the CPUs, transparent huge pages, cgroup limits). Those
// that do not exist are left out. Everything else is unreadable, what
// the host's user may read there included: /var (but for the
// workspace, when it is there), /srv, /mnt, /media, /boot, the rest of
// /sys. The hidden paths are hidden within them too ([DefaultHidden]:
// /etc/shadow, /etc/ssl/private, …); a file only root may read
// elsewhere in /etc, /opt or /usr stays readable when the host runs as
// root (Hide it with [Config.Hide]).
//
// A directory here that is a link (/snap -> /var/lib/snapd/snap, /opt
// on a larger disk) is readable where it leads, as Landlock follows
// it, and what a link in the workspace cannot make a sandbox hide
// there is what leads to, into or above where it leads too (see
// [ResolveHide]).
//
// Where the symbolic links directly in /etc, /etc/ssl, /etc/pki and
// /etc/ca-certificates ([EtcLinkDirs]) lead, found as the sandbox is
// set up (a prepared sandbox whose links lead elsewhere by the time its
// command is handed over refuses it: [ErrPreparedStale]), is readable
// too, when that is not hidden, not "/" or a directory just below it,
// and neither holds the workspace nor is in it: some systems keep part
// of their configuration elsewhere (openSUSE's TLS trust store,
// /etc/ssl/certs, leads to /var/lib/ca-certificates/pem). Links deeper
// in /etc are not followed, and nothing else of /var is readable: a
// package manager's database (/var/lib/dpkg, /var/lib/rpm), the caches
// of /var/cache, a toolchain kept in /srv or /var/lib are not.
//
// A program may change it before it sets any sandbox up (before
// workspace.New), never after: the host reads it, without locking, as
// it prepares each sandbox, which a workspace does in the background,
// and hands it to the sandbox's helper.
var ReadableDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
	"/nix", "/gnu", "/snap", "/proc", "/dev", "/sys/devices/system/cpu", "/sys/kernel/mm/transparent_hugepage",
	"/sys/fs/cgroup"}

// CheckRunnable says why the program at path (absolute, its links
// resolved) cannot be run in a sandbox with the protections p around
// the workspace (absolute, resolved), or returns nil: it is hidden
// there (beneath a path of p.Hidden that does not hold the workspace),
// in the host's /tmp or /dev/shm (the sandbox has its own), or, with
// Landlock, neither in the workspace nor beneath [ReadableDirs] nor
// where p.AlsoReadable says Landlock also allows (where the links
// directly in /etc lead, say: a program reached by one runs). A
// caller checks its shell with it before it runs commands, rather than
// have each fail to start.
//
// A sandbox without Landlock (p.Sandbox, p.Landlock 0) runs a program
// from anywhere it does not hide, but a program outside those places
// is refused all the same: a link a command leaves in the workspace
// makes later sandboxes hide where it leads ([ResolveHide] follows it),
// unless that is beneath [ReadableDirs], where the links of
// [EtcLinkDirs] lead (as read now), or in the workspace. A shell kept
// elsewhere (/srv/tools/sh) would run until a command's ln -s
// /srv/tools sec, with sec/* hidden, hid it from every later sandbox.
func (p Protections) CheckRunnable(path, workspace string) error {
	for _, h := range p.Hidden {
		if within(path, h) && !within(workspace, h) {
			return fmt.Errorf("%s is hidden in the sandbox (beneath %s)", path, h)
		}
	}
	if within(path, workspace) {
		return nil
	}
	for _, own := range []string{"/tmp", "/dev/shm"} {
		if within(path, own) {
			return fmt.Errorf("%s is not in the sandbox, which has a %s of its own", path, own)
		}
	}
	readable := func(d string) bool { return within(path, d) }
	switch {
	case p.Landlock > 0 && !slices.ContainsFunc(systemPlaces(ReadableDirs, nil), readable) && !slices.ContainsFunc(p.AlsoReadable, readable):
		return fmt.Errorf("%s is neither in the workspace nor beneath the directories commands may run programs from (%s), "+
			"nor where a link directly in /etc leads", path, strings.Join(ReadableDirs, ", "))
	case p.Landlock == 0 && p.Sandbox && !slices.ContainsFunc(systemPlaces(ReadableDirs, etcLinked(EtcLinkDirs, workspace)), readable):
		return fmt.Errorf("%s is neither in the workspace nor beneath the system's directories (%s), nor where a link "+
			"directly in /etc leads: without Landlock the sandbox runs it, but a link a command leaves in the workspace "+
			"can make later sandboxes hide it, which it cannot do to those", path, strings.Join(ReadableDirs, ", "))
	}
	return nil
}

// EtcLinkDirs are the directories whose symbolic links, directly in
// them, a sandbox set up with Landlock follows, to let commands read
// where they lead (see [ReadableDirs]): /etc itself and the TLS trust
// stores, which some systems keep elsewhere (openSUSE's /etc/ssl/certs
// leads to /var/lib/ca-certificates/pem).
//
// Name only directories that root owns and no one else can write, on a
// path no one else can change: a link planted in a directory listed
// here makes where it leads readable to commands. Setting a sandbox up
// fails ([ErrConfig], naming the directory) when one is not absolute,
// is writable by its group or others, is owned by a user other than
// root (the host's own user too, when that is not root: commands write
// as that user, and a directory of the user's may be the workspace of
// another program's sandboxes), or is in the workspace; or when a
// directory on the way to it from "/" (through the links on the way
// too) is owned by such a user, or is writable by its group or others
// and not sticky, or is sticky (as /tmp) and what is reached in it is
// owned by such a user; or when it is reached through a link of /proc
// (/proc/self/root/etc: the kernel follows it to what it stands for,
// not to the path the check reads it as); or when it is missing from a
// directory that its group or others may write; or when the host
// cannot search it or a directory on the way to it (EACCES: the
// sandbox's helper may see what the check could not). One missing
// otherwise is left out. Owned by "nobody", the overflow uid (65534),
// counts as owned by root only in a user namespace that does not map
// it: there it stands for the users outside, root among them, and the
// check cannot tell them apart. A
// host that runs as root has root's workspaces owned by root too: the
// check refuses its own workspace, but cannot tell another program's
// from the system's directories, and such a host keeps EtcLinkDirs out
// of every workspace itself.
//
// A program may change it before it sets any sandbox up (before
// workspace.New), never after: the host reads it, without locking, as
// it prepares each sandbox, which a workspace does in the background.
var EtcLinkDirs = []string{"/etc", "/etc/ssl", "/etc/pki", "/etc/ca-certificates"}

// KeptWithNetwork lists the files that stay visible when the network
// is allowed though a directory of [DefaultHidden] holds what they lead
// to: the name resolver's configuration, often a link into /run. What
// such a file leads to is shown at its own path in the directory that
// hides the rest, and nothing beside it, when it is a regular file, no
// link on the way to it is in the workspace (links there are the
// commands'), and no other hidden path ([Config.Hide], the workspace's
// surroundings) covers it. The host reads it, without locking, as it
// prepares each sandbox: a program may change it before it sets any
// sandbox up (before workspace.New), never after.
var KeptWithNetwork = []string{"/etc/resolv.conf"}

// systemDirs hold the software commands run and are never hidden as a
// workspace's surroundings.
var systemDirs = []string{"/", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
	"/usr", "/usr/local", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/share",
	"/usr/include", "/usr/src", "/opt", "/var", "/var/lib", "/var/cache", "/nix", "/nix/store",
	"/gnu", "/gnu/store", "/snap"}

// Surroundings returns the directory the sandbox hides around the
// workspace (an absolute, resolved path): its highest ancestor that is
// not a system directory (/usr, /opt, /var, …; "/" included), so that
// nothing beside the workspace, nor beside any of the directories on
// the way to it below that ancestor, is visible ("cat ../secret" finds
// nothing). It returns "" when every ancestor is a system directory
// (a workspace right in /opt, say): then only the hidden paths are.
func Surroundings(workspace string) string {
	var top string
	for d := filepath.Dir(workspace); d != workspace && !slices.Contains(systemDirs, d); d = filepath.Dir(d) {
		top = d
		workspace = d
	}
	return top
}

// hideList is every path (or pattern) a sandbox around the workspace
// wsPath hides besides [Config.Hide], which is resolved once
// ([ResolveHide], [Config.Resolved]) rather than at each set-up: these
// are the system's, out of the commands' reach. defaults are hidden
// ([DefaultHidden] as the host has it); others are the rest.
func hideList(hidden []string, wsPath string) (defaults, others []string) {
	if s := Surroundings(wsPath); s != "" && !sandboxesOwn(s) {
		others = append(others, s)
	}
	return hidden, others
}

// sandboxesOwn reports whether the path p (clean, absolute) is /tmp or
// /dev or beneath them, which in a sandbox are its own: a private
// tmpfs on /tmp, and a /dev of its devices, its pseudo-terminals and a
// private tmpfs on /dev/shm. Nothing of the host's is there to hide (a
// workspace beneath them is mounted there, and what is hidden in it is
// hidden), and a cover there would take from commands the writable
// /tmp and /dev/shm and the devices they need (a workspace beneath
// /dev/shm has /dev for its surroundings).
func sandboxesOwn(p string) bool { return within(p, "/tmp") || within(p, "/dev") }

// HiddenPath is an entry of [Config.Hide] as [ResolveHide] found it,
// before any command ran: its path with the links on the way to it
// followed, and the identity (device and inode) of what was there.
// A sandbox hides that path, not what the entry's links lead to by
// then: commands may have changed those. Beneath the workspace, where
// things are renamed and replaced, the set-up refuses to run a command
// when the path no longer holds what was found there
// ([ErrHiddenMoved]). A command cannot rename or remove a path its
// sandbox hides, nor a directory of the workspace on the way to one,
// whenever that path appeared (each such directory, one a pattern's
// wildcard matched included, is a mount point in the sandbox: removing
// it fails with EBUSY, and rename(2) into or out of it with EXDEV), so
// it cannot take a hidden path to a name the next sandbox does not
// hide. A directory on the way to where a path to hide or a pattern's
// match would be, while nothing is there when the command's sandbox is
// set up (a pattern's directory with no match, say), is no mount
// point: a command can rename it, remove it (when empty), and put a
// link in its place. The next set-up follows such a link when it leads
// to a place in the workspace (not the workspace itself), for an exact
// path and for a pattern's directory alike, and hides what the path or
// the pattern's rest finds there, at its real place. The link itself is
// no mount point (a command can remove or retarget it), so every later
// set-up hides that place too, whatever became of the link, for as
// long as the Config is kept: see [LinkTargets].
//
// A file to hide in the workspace must have one hard link
// ([ErrHiddenLinked]), and is shown to a running command when it is
// replaced from outside the sandbox meanwhile (see the package's
// "What the covers do not hide").
type HiddenPath struct {
	Path string `json:"path"`
	// Dev and Ino are 0 when nothing was there: the entry is then
	// resolved again at each set-up, and hidden if it exists by then;
	// links in the workspace on the way (a command's) are followed only
	// to a place in the workspace (not the workspace itself), which is
	// then hidden: the entry leads nowhere otherwise. A pattern is kept
	// too, as Path with no identity beside what it matched: it is
	// matched again at each set-up, listing directories reached through
	// links in the workspace only where they lead to a place in it
	// other than the workspace itself, and what it matches then is
	// hidden (where the links lead).
	// A set-up lists each directory a component with a pattern needs,
	// so "/w/*/*.pem" reads the workspace's top directory and each of
	// its subdirectories, every time.
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
	// Birth is when the file was made (statx's btime, in nanoseconds
	// since the epoch), part of its identity: a file system gives the
	// inode number of a file gone to the next one made (ext4 at once),
	// which may then stand at the path while the file that replaced the
	// one expected was moved where commands see it. 0 when the file
	// system does not say, and then the device and inode alone tell.
	Birth int64 `json:"birth,omitempty"`
	// LedOut marks a pattern, or a path that did not exist, that
	// [ResolveHide] kept with its directory where a link in the
	// workspace led it, out of the workspace (/elsewhere/sec/*.key,
	// for sec/*.key with sec -> /elsewhere/sec). That link may be a
	// command's, and so the place: a match there, or the path, that
	// leads to "/", to the workspace, or to, into or above a directory
	// of [ReadableDirs] or where a link of [EtcLinkDirs] leads (as the
	// sandbox is set up) leads nowhere at a set-up, as it does through
	// the link as the workspace is opened: what commands need to run
	// stays theirs. A directory there that holds more than 64 of a
	// pattern's matches is hidden whole, with one cover, rather than
	// match by match, when it is neither "/", nor such a system place,
	// nor holds the workspace (see [MaxHidden]). The same pattern or
	// path named in Hide is hidden by the usual rules. Where a
	// directory on the way was missing, the place kept is beneath the
	// deepest that existed (/elsewhere/sec/sub/a.key for
	// sec/sub/a.key); the wildcards in the names of the place the links
	// led to are escaped, so that it leads there only: a name so
	// escaped is looked up as written, byte for byte, not whatever its
	// case (on a case-sensitive directory, S[1] leads to S[1], not to
	// s[1] beside it).
	LedOut bool `json:"ledOut,omitempty"`
}

// ErrHiddenMoved is wrapped by the set-up error of a sandbox that
// refused to run its command because a path to hide beneath the
// workspace was moved or replaced since [ResolveHide], from outside
// the sandboxes (by the host, say, or a command of a workspace that
// holds this one: this one's commands cannot, see [HiddenPath]): what
// it held may now be elsewhere, visible. Someone must put it back, or
// open the workspace again.
var ErrHiddenMoved = errors.New("a hidden path in the workspace was moved or replaced")

// ErrHiddenLinked is wrapped by the set-up error of a sandbox that
// refused to run its command because a file to hide beneath the
// workspace has more than one hard link: a sandbox covers a name, not
// the file, so the file's other names (ln .env notes.txt, made from
// outside the sandboxes) would show it to commands, and finding them
// would take a walk of the file system at each set-up (they may be
// anywhere on it, in the workspace or not). The host must remove the
// other links (find -samefile names them), or copy the file rather
// than link it. The links of a file to hide outside the workspace are
// not counted: its other names are seen where a sandbox shows their
// directory (see [ReadableDirs]). Run's check of a prepared sandbox
// counts them again, and refuses ([ErrPreparedStale], wrapping this
// too) a file linked since the set-up.
var ErrHiddenLinked = errors.New("a hidden file in the workspace has another hard link")

// LinkTargets is the set of places in a workspace where links led the
// paths to hide ([Config.Resolved]) when a sandbox was set up: a link
// a command planted at a path to hide (.env -> notes.txt), or at a
// pattern's directory (sec -> real, for sec/*.key), through which the
// host may have written a secret, which then is at the link's target
// (notes.txt, real/a.key). Each set-up hides what links lead to then,
// and adds those places to the set; each later set-up (and
// [Process.Run]'s check) hides every place of the set too, whatever
// became of the link: the link itself is no mount point, and the
// command of that very sandbox can remove or retarget it, but what the
// host wrote through it stays hidden under its real name. A place is
// resolved again at each set-up, as a path to hide that did not exist
// when the workspace was opened is (links in the workspace followed
// only to a place in it), and dropped from the set once it no longer
// exists: what was written there is gone.
//
// The set is in memory only, one per workspace directory for the
// process ([LinkTargetsOf]), shared by every Config of a workspace on
// that directory (several sessions may open one): what one of them
// hid stays hidden from the others' sandboxes too.
// [Config.WithDefaults] makes a set of the Config's own when it has
// none, which the copies of the Config share: a caller with several
// Configs on one directory gives each LinkTargetsOf(dir) instead.
// A set-up learns nothing of a
// link removed before the set was made: a set made anew (after a
// restart, say) hides what links lead to then ([ResolveHide] follows
// them, once, and hides their targets for good), not where a link
// removed since led. It is safe for concurrent use.
//
// No command can take a place out of the set (it is a mount point in
// each sandbox), though a link may have led there for one command
// only (ln -s src .env; rm .env hides src from every later command).
// The places are reported in [Protections.LinkTargets], and only the
// host can drop them: with [LinkTargets.Forget], once it knows that no
// secret was written through a link to them.
type LinkTargets struct {
	mu    sync.Mutex
	paths map[string]bool
	// forgets counts the calls to Forget that dropped a place: a
	// sandbox set up before one hides too much, and is not used.
	forgets uint64
}

// linkTargetsByDir holds the set of each workspace directory: see
// LinkTargetsOf.
var linkTargetsByDir sync.Map // string (cleaned directory) -> *LinkTargets

// LinkTargetsOf returns the set of places links led to for the
// workspace at dir (absolute, links resolved, as [ResolveHide] resolves
// it), the same one for every call with that directory as long as the
// process runs: give it to the [Config] of each workspace on dir, so
// that what a sandbox of one hid where a link led, the sandboxes of
// the others hide too. An empty set costs a map entry per directory.
func LinkTargetsOf(dir string) *LinkTargets {
	dir = filepath.Clean(dir)
	if t, ok := linkTargetsByDir.Load(dir); ok {
		return t.(*LinkTargets)
	}
	t, _ := linkTargetsByDir.LoadOrStore(dir, new(LinkTargets))
	return t.(*LinkTargets)
}

// Forget drops the named places from the set: the next set-ups no
// longer hide them (unless a link leads a path to hide there again),
// and a sandbox set up before, and prepared for a command, refuses it
// ([ErrPreparedStale]) for another to be set up. Only the host can do
// this, and only once it knows that nothing secret was written through
// a link to those places (a link at a path to hide, which commands can
// plant): they are hidden because the host may have written a secret
// there. Forget with no place named drops none.
func (t *LinkTargets) Forget(places ...string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	dropped := false
	for _, p := range places {
		if t.paths[filepath.Clean(p)] {
			delete(t.paths, filepath.Clean(p))
			dropped = true
		}
	}
	if dropped {
		t.forgets++
	}
}

// snapshot returns the places of the set, sorted, and how many calls
// to Forget dropped one so far.
func (t *LinkTargets) snapshot() ([]string, uint64) {
	if t == nil {
		return nil, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.paths)), t.forgets
}

// forgotten returns how many calls to Forget dropped a place so far.
func (t *LinkTargets) forgotten() uint64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.forgets
}

// Paths returns the places of the set, sorted.
func (t *LinkTargets) Paths() []string {
	paths, _ := t.snapshot()
	return paths
}

// add adds the places a set-up found links to lead to, and, when one
// is new, drops from the set those that no longer exist.
func (t *LinkTargets) add(found []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paths == nil {
		t.paths = map[string]bool{}
	}
	grew := false
	for _, p := range found {
		if !t.paths[p] {
			t.paths[p] = true
			grew = true
		}
	}
	if !grew {
		return
	}
	for p := range t.paths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			delete(t.paths, p)
		}
	}
}

// ResolveHide checks hide against the workspace as [CheckHide] does
// and resolves it once and for all: patterns expanded (and kept, to be
// matched again at each set-up), links followed, the identity of each
// path that exists recorded. The result is what a
// [Config]'s Resolved field wants.
//
// Every link is followed, those in the workspace too, wherever they
// lead: the workspace as it is opened is taken as its owner left it
// (a link to a secret kept elsewhere hides that secret). What commands
// of an earlier opening made of it can then only make a sandbox hide
// more, never less: each set-up matches the patterns again, and hides
// what they match by its own rules (see [HiddenPath]), besides what
// was resolved here; a pattern, or a path that does not exist yet,
// whose directory a link in the workspace leads out of it (sec ->
// /elsewhere/sec for sec/*.key or sec/a.key) is kept with that
// directory too (/elsewhere/sec/*.key, /elsewhere/sec/a.key), and
// looked for there at each set-up, which follows no link out of the
// workspace (what leads from there into a system directory leads
// nowhere: see [HiddenPath.LedOut]). Only a path or a
// pattern's match that leads to
// "/", to the workspace itself or nowhere (a loop) through a link in
// the workspace leads nowhere, as it does at a set-up, and is not
// refused (a command's "ln -s / a.key" does not keep the workspace
// from being opened with *.key hidden). Nor does one that leads
// through a link in the workspace to, into or above a directory of
// [ReadableDirs] (.env -> /usr, sec -> /usr/bin for sec/*, sh ->
// /bin/sh), or to, into or above where a link of [EtcLinkDirs] leads
// (openSUSE's TLS trust store, /var/lib/ca-certificates):
// such a link may be a command's, and what it leads to is
// what commands need to run, so a command cannot make later sandboxes
// hide the system. A secret kept there is hidden by naming it itself
// in Hide, not through a link ([ResolveHideNoting] says which entries
// such a link led nowhere, for the host to warn of). Nor can such a
// link make later sandboxes fail for a pattern matching more than
// [MaxHidden] paths where it leads: a directory there that holds more
// than 64 of its matches is hidden whole, with one cover (unless it is
// "/", a system place as above, or holds the workspace); when what
// patterns still lead to through such links takes the paths a set-up
// hides (what Hide resolved to, counting one for each path of
// [DefaultHidden] and the surroundings, and what each pattern of
// DefaultHidden matches) beyond MaxHidden, one pattern
// or several together, Hide is refused ([ErrTooManyHidden], with
// [ErrConfig]), the error naming the link that leads to the most and
// where it leads, for the host to remove it. A FIFO is never
// opened, and each directory is listed once per component of a
// pattern, whatever number of links lead to it.
func ResolveHide(hide []string, workspace string) ([]HiddenPath, error) {
	resolved, _, err := ResolveHideNoting(hide, workspace)
	return resolved, err
}

// LinkToSystem is an entry of [Config.Hide] that [ResolveHide] did not
// hide, in part or whole, because it leads through a link in the
// workspace to, into or above a directory of [ReadableDirs] or where
// a link of [EtcLinkDirs] leads: a secret
// the workspace's owner keeps there and reaches through that link is
// visible to commands. Naming the secret itself in Hide hides it.
type LinkToSystem struct {
	Entry string // the entry of Hide
	// Path is the first of its paths left out: the entry, a match of
	// the pattern, or its directory (a pattern's components before its
	// first wildcard, a path's parent) where no set-up looks for what
	// appears later; links on the way are not followed.
	Path  string
	To    string // where the links led Path
	Count int    // how many paths that existed were left out (a pattern's matches)
}

// ResolveHideNoting is [ResolveHide], which also returns the entries
// of hide it left out, in part or whole, because they lead through a
// link in the workspace into a system directory (one LinkToSystem per
// entry, in the order of hide), so that the host can warn of them.
func ResolveHideNoting(hide []string, workspace string) ([]HiddenPath, []LinkToSystem, error) {
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: workspace %s: %v", ErrConfig, workspace, err)
	}
	var out []HiddenPath
	var notes []LinkToSystem
	have := map[HiddenPath]bool{}
	// counted is how many paths kept a set-up counts towards MaxHidden
	// (see sandboxesOwn); most is the entry whose matches out of the
	// workspace through a link in it count the most, for the error
	// should they make too many.
	counted := 0
	var most struct {
		i, n    int
		h, link string
	}
	// The system's places (where the links of /etc lead among them) are
	// read only once a link in the workspace leads somewhere.
	system := sync.OnceValue(func() []string { return systemPlaces(ReadableDirs, etcLinked(EtcLinkDirs, ws)) })
	for i, h := range hide {
		if !filepath.IsAbs(h) {
			return nil, nil, fmt.Errorf("%w: Hide[%d] = %q: want an absolute path", ErrConfig, i, h)
		}
		matches := []string{h}
		note := LinkToSystem{Entry: h}
		if isPattern(h) {
			if matches, err = globOpened(h); err != nil {
				return nil, nil, fmt.Errorf("%w: Hide[%d] = %q: %v", ErrConfig, i, h, err)
			}
			// The pattern itself, with no identity, is matched again at
			// each set-up: what matches it only later is hidden too;
			// and so is the pattern where a link in the workspace led
			// its directory out of it, which a set-up does not follow.
			ledOut, dir, to := ledOutOfWorkspace(h, ws, system)
			for _, hp := range []HiddenPath{{Path: h}, {Path: ledOut, LedOut: true}} {
				if hp.Path != "" && !have[hp] {
					have[hp] = true
					out = append(out, hp)
				}
			}
			if to != "" {
				note.Path, note.To = dir, to
			}
		}
		// keep keeps the path m, at r where it leads ("" for nowhere
		// yet), with its identity.
		keep := func(m, r string) error {
			hp := HiddenPath{Path: filepath.Clean(m)}
			if r != "" {
				fi, err := os.Lstat(r)
				if err != nil {
					return fmt.Errorf("%w: Hide[%d] = %q: %v", ErrConfig, i, h, err)
				}
				hp.Path = r
				hp.Dev, hp.Ino = fileID(fi)
				hp.Birth = birthOf(r, hp.Ino)
			}
			if !have[hp] {
				have[hp] = true
				out = append(out, hp)
				if r != "" && (!sandboxesOwn(r) || within(r, ws)) {
					counted++
				}
			}
			return nil
		}
		// The pattern's matches out of the workspace through a link in
		// it, where they lead, and the first such link.
		var led []string
		var link string
		for _, m := range matches {
			r, err := resolveHidden(nil, m, ws, false)
			if err != nil && throughWorkspaceLink(m, ws) {
				if isPattern(h) {
					continue
				}
				r, err = "", nil
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%w: Hide[%d] = %q: %v", ErrConfig, i, h, err)
			}
			if r != "" && throughWorkspaceLink(m, ws) && systemPlace(r, ws, system()) {
				if note.Count++; note.To == "" {
					note.Path, note.To = filepath.Clean(m), r
				}
				if isPattern(h) {
					continue
				}
				r = ""
			}
			if isPattern(h) && r != "" && !within(r, ws) {
				if l := workspaceLinkOn(m, ws); l != "" {
					if link == "" {
						link = l
					}
					led = append(led, r)
					continue
				}
			}
			if err := keep(m, r); err != nil {
				return nil, nil, err
			}
			if r != "" || isPattern(h) {
				continue
			}
			// Nothing there yet: what is written there later, through
			// a link in the workspace that leads its directory out of
			// it, is hidden where that link led, as for a pattern.
			ledOut, dir, to := ledOutOfWorkspace(h, ws, system)
			if hp := (HiddenPath{Path: ledOut, LedOut: true}); ledOut != "" && !have[hp] {
				have[hp] = true
				out = append(out, hp)
			}
			if to != "" && note.To == "" {
				note.Path, note.To = dir, to
			}
		}
		before := counted
		for _, r := range gatherCrowds(led, ws, system()) {
			if err := keep(r, r); err != nil {
				return nil, nil, err
			}
		}
		if n := counted - before; n > most.n {
			most.i, most.n, most.h, most.link = i, n, h, link
		}
		if note.To != "" {
			notes = append(notes, note)
		}
	}
	// A set-up hides every path kept, and the defaults: the entries led
	// out of the workspace through links in it may not take that beyond
	// MaxHidden, one entry or all together, or every set-up fails.
	if most.n == 0 {
		return out, notes, nil // nothing led out: the defaults' patterns need no matching
	}
	if total := counted + defaultsReserve(DefaultHidden); total > MaxHidden {
		to, _ := resolveLinks(nil, most.link, ws, true)
		return nil, nil, fmt.Errorf("%w: Hide[%d] = %q: %w: it leads through the link %s, in the workspace, "+
			"which leads out of it to %s, to %d paths to hide (%d with the rest of Hide and DefaultHidden), more "+
			"than MaxHidden (%d), in directories none of which holds more than %d of them to be hidden whole; the "+
			"link may be a command's: remove it from outside the sandboxes (os.Remove removes the link, not what it "+
			"leads to), or name in Hide what it leads to that is secret", ErrConfig, most.i, most.h, ErrTooManyHidden,
			most.link, to, most.n, total, MaxHidden, crowd)
	}
	return out, notes, nil
}

// defaultsReserve is what ResolveHide keeps, of MaxHidden, for the
// paths a set-up hides besides Hide: one for each path of hidden
// ([DefaultHidden]) and for the workspace's surroundings, and what each
// pattern of hidden matches now (the host's keys of
// /etc/ssh/ssh_host_*_key), beyond the sandbox's own /tmp and /dev,
// where nothing is covered. A pattern that cannot be matched counts one.
func defaultsReserve(hidden []string) int {
	n := 1
	for _, h := range hidden {
		if !isPattern(h) {
			n++
			continue
		}
		matches, err := globOpened(h)
		if err != nil {
			n++
			continue
		}
		for _, m := range matches {
			if !sandboxesOwn(m) {
				n++
			}
		}
	}
	return n
}

// ledOutOfWorkspace returns the pattern or path h (absolute) with its
// directory (a pattern's components before its first wildcard, a
// path's parent) where links lead it when that is through a link in
// the workspace wsPath to a directory out of it (sec -> /elsewhere/sec
// for sec/*.key gives /elsewhere/sec/*.key, for sec/a.key
// /elsewhere/sec/a.key), not "/" nor a system place (see systemPlace,
// with the places system returns): otherwise "". Where the directory is missing,
// the deepest directory on the way to it that exists says where it
// leads (sec/sub/a.key gives /elsewhere/sec/sub/a.key); the wildcards
// of where the links led are escaped (/elsewhere/s\[1\]/*.key). A
// set-up follows no link out of the workspace, so this is how it
// hides, each time, where the workspace's owner keeps secrets through
// a link, whatever became of the link. When the directory dir leads so
// into a system place, to is where: nothing is kept there.
func ledOutOfWorkspace(h, wsPath string, system func() []string) (ledOut, dir, to string) {
	parts := strings.Split(h, "/")
	i := slices.IndexFunc(parts, isPattern)
	if i < 0 {
		i = len(parts) - 1
	}
	dir = strings.Join(parts[:i], "/")
	if dir == "" {
		return "", "", ""
	}
	// The deepest directory on the way that exists: the rest is made
	// there later, if ever. Each try follows at most maxLinks links.
	j, r, ok := i, "", false
	for ; j > 1; j-- {
		if r, ok = resolveLinks(nil, strings.Join(parts[:j], "/"), "", true); ok {
			break
		}
	}
	if !ok || r == "/" || within(r, wsPath) || within(wsPath, r) || !throughWorkspaceLink(dir, wsPath) {
		return "", "", ""
	}
	if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
		return "", "", ""
	}
	if systemPlace(r, wsPath, system()) {
		return "", dir, r
	}
	return filepath.Join(append([]string{escapeNames(r)}, parts[j:]...)...), "", ""
}

// escapeNames returns the path p (clean) with the wildcards of its
// names escaped (see filepath.Match), so that as part of a path or
// pattern to hide it leads only to p: a name with a wildcard is
// listed and matched as written, byte for byte (see matchName), one
// without is looked up as it is written, backslashes and all. The
// names are taken as bytes: one that is not UTF-8 stays itself.
func escapeNames(p string) string {
	if !isPattern(p) {
		return p
	}
	names := strings.Split(p, "/")
	for k, n := range names {
		if isPattern(n) {
			var b strings.Builder
			for i := 0; i < len(n); i++ {
				if strings.IndexByte(`*?[\`, n[i]) >= 0 {
					b.WriteByte('\\')
				}
				b.WriteByte(n[i])
			}
			names[k] = b.String()
		}
	}
	return strings.Join(names, "/")
}

// systemPlace reports whether the path r (resolved) outside the
// workspace wsPath is, holds, or is beneath one of system (see
// systemPlaces): the system's programs, libraries and configuration,
// which commands need.
func systemPlace(r, wsPath string, system []string) bool {
	if within(r, wsPath) {
		return false
	}
	return slices.ContainsFunc(system, func(d string) bool { return within(r, d) || within(d, r) })
}

// systemPlaces returns the places systemPlace leaves to commands: the
// directories of readableDirs ([ReadableDirs] as the host has them),
// as written and where their links lead (/snap leads to
// /var/lib/snapd/snap on some systems, /opt to a larger disk on
// others: Landlock follows the links, and what is matched to hide is
// resolved), but for one that leads to "/"; and etc, where the links
// of [EtcLinkDirs] lead (see etcLinked).
func systemPlaces(readableDirs, etc []string) []string {
	out := slices.Clone(etc)
	for _, d := range readableDirs {
		d = filepath.Clean(d)
		out = append(out, d)
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d && r != "/" {
			out = append(out, r)
		}
	}
	return out
}

// etcLinked returns where the symbolic links directly in the
// directories of etcDirs ([EtcLinkDirs]) lead, followed in the host's
// view, once each, but for "/", a directory just below it, and what
// holds the workspace wsPath or is in it: what a sandbox set up with
// Landlock lets commands read besides [ReadableDirs] (openSUSE's TLS
// trust store, say), unless it is hidden. A link whose way goes
// through a link of /proc (/proc/self/cwd, /proc/self/fd/3, or
// /etc/mtab's ../proc/self/mounts) is left out: the kernel follows
// those to what they stand for in the process that follows them, a
// command's own, not to the path they read as in the host.
func etcLinked(etcDirs []string, wsPath string) []string {
	var out []string
	for _, d := range etcDirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			path, err := walkLinks(filepath.Join(d, e.Name()), func(dir, next string) (os.FileInfo, error) {
				fi, err := os.Lstat(next)
				if err == nil && fi.Mode()&os.ModeSymlink != 0 && (within(next, wsPath) || onProcfs(dir)) {
					return nil, errors.New("a link in the workspace or in /proc")
				}
				return fi, err
			})
			if err == nil && strings.Count(path, "/") >= 2 && !within(path, wsPath) && !within(wsPath, path) && !slices.Contains(out, path) {
				out = append(out, path)
			}
		}
	}
	return out
}

// throughWorkspaceLink reports whether the way to the path m
// (absolute) goes through a link in the workspace wsPath (a command's)
// before it ends or fails.
func throughWorkspaceLink(m, wsPath string) bool { return workspaceLinkOn(m, wsPath) != "" }

// workspaceLinkOn returns the first link in the workspace wsPath on
// the way to the path m (absolute), or "" when there is none before
// the way ends or fails.
func workspaceLinkOn(m, wsPath string) string {
	var link string
	_, _ = walkLinks(m, func(_, next string) (os.FileInfo, error) {
		fi, err := os.Lstat(next)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 && within(next, wsPath) {
			link = next
			return nil, errors.New("a link in the workspace")
		}
		return fi, err
	})
	return link
}

// crowd is the number of matches of one pattern to hide, in one
// directory, beyond which the directory is hidden whole rather than
// each match (see gatherCrowds).
const crowd = 64

// gatherCrowds returns rs, the places where the matches of one pattern
// to hide lead out of the workspace wsPath, through a link in it (as
// the workspace is opened) or where such a link led it (at a set-up:
// see [HiddenPath.LedOut]), with the places of each directory that
// holds more than crowd of them replaced by the directory, hidden
// whole with one cover, when it may be: it is not "/", neither holds
// the workspace nor is in it, is not the sandbox's own (see
// sandboxesOwn: a set-up covers nothing there, nor counts it) and is
// no system place (see systemPlace, with system). Such a link may be a
// command's, and the directory any the host can read: a pattern that
// matched there more paths than a sandbox hides ([MaxHidden]) would
// fail every set-up. The directory holds nothing the command sees.
func gatherCrowds(rs []string, wsPath string, system []string) []string {
	count := map[string]int{}
	for _, r := range rs {
		count[filepath.Dir(r)]++
	}
	whole := func(d string) bool {
		return count[d] > crowd && d != "/" && !within(d, wsPath) && !within(wsPath, d) && !sandboxesOwn(d) &&
			!systemPlace(d, wsPath, system)
	}
	var out []string
	gathered := map[string]bool{}
	for _, r := range rs {
		switch d := filepath.Dir(r); {
		case !whole(d):
			out = append(out, r)
		case !gathered[d]:
			gathered[d] = true
			out = append(out, d)
		}
	}
	return out
}

// hidePlan is what to cover, resolved: paths outside the workspace
// (ancestors of the workspace among them) and paths inside it, covered
// once it is mounted; ids are the identities ResolveHide recorded;
// missing are the entries to look for again once the workspace is
// mounted: the paths that led nowhere, and every pattern, and
// missingTargets the link targets (see [LinkTargets]) that led
// nowhere; targets are the places in the workspace links led to.
type hidePlan struct {
	outside, inside, ancestors, missing []string
	missingTargets, targets             []string
	ids                                 map[string]HiddenPath
	seen                                lstats          // what the planning found
	matched                             map[string]int  // each pattern's number of matches
	ledOut                              map[string]bool // the patterns kept where a link led (see ledOutOf)
	system                              []string        // the places commands need (see planHiding)
}

// lstats remembers what Lstat returned for each path, for one look at
// the paths to hide: the directories on the way to them (/etc, /var,
// the workspace) are each looked at once. A nil lstats remembers
// nothing.
type lstats map[string]lstatResult

type lstatResult struct {
	fi  os.FileInfo
	err error
}

// lstat is os.Lstat, remembered.
func (c lstats) lstat(path string) (os.FileInfo, error) {
	if c == nil {
		return os.Lstat(path)
	}
	if r, ok := c[path]; ok {
		return r.fi, r.err
	}
	fi, err := os.Lstat(path)
	c[path] = lstatResult{fi, err}
	return fi, err
}

// ErrConfig is wrapped by the errors that come from a configuration the
// sandbox cannot honour, not from what the kernel lacks.
var ErrConfig = errors.New("sandbox configuration")

// planHiding resolves list (links followed, patterns matched, missing
// paths left out) around the workspace wsPath (resolved), and adds the
// paths fixed resolved once (those missing then, and the patterns,
// resolved again now) and the places earlier set-ups hid where links
// led (targets, see [LinkTargets]: paths, never patterns, whatever
// characters their names hold). A link in the workspace (a command's)
// is followed only into it, as resolveHidden and globHidden say; the
// places in the workspace that links led to are the plan's targets.
// system are the places of [ReadableDirs] and where the links of
// [EtcLinkDirs] lead (see systemPlaces), left alone where a place kept
// for a link in the workspace leads (see [HiddenPath.LedOut]).
func planHiding(list []string, fixed []HiddenPath, targets []string, wsPath string, system []string) (hidePlan, error) {
	return planHidingLedOut(list, fixed, targets, wsPath, ledOutOf(fixed), system)
}

// ledOutOf returns the patterns of fixed kept only where a link in the
// workspace led them ([HiddenPath.LedOut]), not named as such too.
func ledOutOf(fixed []HiddenPath) map[string]bool {
	ledOut := map[string]bool{}
	for _, f := range fixed {
		if f.LedOut {
			ledOut[f.Path] = true
		}
	}
	for _, f := range fixed {
		if !f.LedOut {
			delete(ledOut, f.Path)
		}
	}
	return ledOut
}

// planHidingLedOut is planHiding, with the patterns of ledOut matched
// as [HiddenPath.LedOut] says: a match that leads into a system place
// (see systemPlace, with system) leads nowhere, and a directory where
// more than crowd matches of one lie is hidden whole (see
// gatherCrowds).
func planHidingLedOut(list []string, fixed []HiddenPath, targets []string, wsPath string, ledOut map[string]bool,
	system []string) (hidePlan, error) {
	var resolved, missing, missingTargets, found []string
	ids := map[string]HiddenPath{}
	seen := lstats{}
	have := map[string]bool{} // resolved, as a set
	matched := map[string]int{}
	add := func(r string) error {
		if have[r] || sandboxesOwn(r) && !within(r, wsPath) {
			// Twice, or in the sandbox's own /tmp or /dev, where
			// nothing is covered (see sandboxesOwn), nor counted.
			return nil
		}
		if len(resolved) >= MaxHidden {
			return tooManyHidden(0, matched, targets, wsPath)
		}
		have[r] = true
		resolved = append(resolved, r)
		return nil
	}
	// addAt adds r, where the path m led, noting it as a target when a
	// link led there in the workspace.
	addAt := func(m, r string) error {
		if r != filepath.Clean(m) && r != wsPath && within(r, wsPath) {
			found = append(found, r)
		}
		return add(r)
	}
	for _, f := range fixed {
		if f.LedOut && !ledOut[f.Path] {
			continue // named as such too: matched once, by the usual rules
		}
		if f.Dev == 0 && f.Ino == 0 {
			list = append(list, f.Path)
			continue
		}
		ids[f.Path] = f
		if err := add(f.Path); err != nil {
			return hidePlan{}, err
		}
	}
	for _, h := range list {
		matches := []string{h}
		if isPattern(h) {
			var err error
			if matches, err = globHidden(seen, h, wsPath); err != nil {
				return hidePlan{}, fmt.Errorf("%w: hide %s: %v", ErrConfig, h, err)
			}
			matched[h] = len(matches)
			// Looked for again once the workspace is mounted, whatever
			// it matched now: a workspace beneath /tmp is not there
			// to be matched before.
			missing = append(missing, h)
		}
		var kept []string // the matches of a pattern of ledOut, where they lead
		for _, m := range matches {
			r, err := resolveHidden(seen, m, wsPath, true)
			if err != nil && (isPattern(h) || ledOut[h]) && (r == "/" || r == wsPath) {
				// A match that leads to "/" or the workspace (a
				// link made where the pattern matches), or a path
				// kept where a link in the workspace led, leads
				// nowhere.
				continue
			}
			if err != nil {
				return hidePlan{}, fmt.Errorf("%w: hide %s: %v", ErrConfig, h, err)
			}
			if r != "" && ledOut[h] && systemPlace(r, wsPath, system) {
				continue // where a command's link may have led: see HiddenPath.LedOut
			}
			switch {
			case r == "":
				if !isPattern(h) {
					missing = append(missing, m)
				}
			case ledOut[h] && isPattern(h) && !within(r, wsPath):
				kept = append(kept, r)
			default:
				if err := addAt(m, r); err != nil {
					return hidePlan{}, err
				}
			}
		}
		for _, r := range gatherCrowds(kept, wsPath, system) {
			if err := add(r); err != nil {
				return hidePlan{}, err
			}
		}
	}
	for _, t := range targets {
		r, err := resolveHidden(seen, t, wsPath, true)
		if err != nil {
			return hidePlan{}, fmt.Errorf("%w: hide %s (a link led there): %v", ErrConfig, t, err)
		}
		if r == "" {
			missingTargets = append(missingTargets, t)
		} else if err := addAt(t, r); err != nil {
			return hidePlan{}, err
		}
	}
	// Parents first: what is beneath a hidden directory is hidden with
	// it, except beneath the workspace, which stays visible.
	slices.SortFunc(resolved, func(a, b string) int { return len(a) - len(b) })
	plan := hidePlan{ids: ids, missing: missing, missingTargets: missingTargets, targets: found, seen: seen, matched: matched,
		ledOut: ledOut, system: system}
	inside, outside := pathSet{}, pathSet{}
	for _, r := range resolved {
		if within(r, wsPath) {
			if !inside.holds(r) {
				inside.add(r)
				plan.inside = append(plan.inside, r)
			}
			continue
		}
		if outside.holds(r) || sandboxesOwn(r) {
			continue
		}
		outside.add(r)
		plan.outside = append(plan.outside, r)
		if within(wsPath, r) {
			plan.ancestors = append(plan.ancestors, r)
		}
	}
	return plan, nil
}

// MaxHidden bounds the paths one sandbox hides (the entries of
// [DefaultHidden], the workspace's surroundings and [Config.Hide],
// with every match of their patterns). Each is a mount in the
// sandbox, and commands make the files patterns match: a set-up that
// would hide more refuses to run the command ([ErrTooManyHidden])
// rather than run it with some of them visible, or spend seconds
// mounting. The error names the patterns that match the most, and how
// many paths each matches. A pattern's matches out of the workspace
// through a link in it (as the workspace is opened, see [ResolveHide];
// at a set-up, where such a link led it: see [HiddenPath.LedOut]) are
// an exception: a directory that holds more than 64 of them is hidden
// whole, with one cover (see [HiddenPath.LedOut] for which directories
// may be), so that a command's link to a crowded directory (a pattern's
// directory made a link to one the host reads, /var/lib/dpkg/info say)
// cannot fail every later set-up; and [ResolveHide] refuses the
// patterns that still take through such links what a set-up hides
// beyond MaxHidden, naming a link, which the host removes. No command can mend this, since none runs:
// the host must remove matches itself, outside the sandboxes (their
// names are what the pattern matches beneath the workspace: list them
// with filepath.Glob and remove each with os.Remove, which removes a
// link rather than what it leads to), or hide a directory that holds
// them instead of the pattern.
// The places of [LinkTargets] count too: the error says how many there
// are, with a few of them, and the host may drop those it knows hold
// no secret ([LinkTargets.Forget]).
const MaxHidden = 4096

// ErrTooManyHidden is wrapped by the set-up error of a sandbox that
// would hide more than [MaxHidden] paths.
var ErrTooManyHidden = errors.New("sandbox: too many paths to hide")

// tooManyHidden is the error of a set-up that would hide more than
// MaxHidden paths: total of them (0 when the set-up stopped counting),
// matched being each pattern's number of matches, the largest named
// (relative to the workspace wsPath when beneath it), and targets the
// places of [LinkTargets] the set-up was given, which count too, with
// what to do. In the workspace's terms ([InWorkspaceTerms]) a pattern
// outside the workspace is not named.
func tooManyHidden(total int, matched map[string]int, targets []string, wsPath string) error {
	err := fmt.Errorf("%w: %s", ErrTooManyHidden, tooManyText(total, matched, targets, func(p string) string {
		return relName(p, wsPath)
	}))
	inWorkspace := tooManyText(total, matched, targets, func(p string) string {
		if wsPath == "" || !within(p, wsPath) || p == wsPath {
			return ""
		}
		return relName(p, wsPath)
	})
	return workspaceTermsError{err, inWorkspace}
}

// tooManyText is what tooManyHidden says, with each pattern and place
// named by name ("" when it is not to be named: a pattern is then said
// to be outside the workspace, a place is left out).
func tooManyText(total int, matched map[string]int, targets []string, name func(string) string) string {
	pats := slices.Collect(maps.Keys(matched))
	slices.SortFunc(pats, func(a, b string) int {
		if c := cmp.Compare(matched[b], matched[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var named []string
	for _, p := range pats {
		if matched[p] == 0 || len(named) == 3 {
			break
		}
		if n := name(p); n != "" {
			named = append(named, fmt.Sprintf("pattern %s matches %d", n, matched[p]))
		} else {
			named = append(named, fmt.Sprintf("a pattern outside the workspace matches %d", matched[p]))
		}
	}
	if len(targets) > 0 {
		var eg []string
		for _, t := range targets {
			if n := name(t); n != "" && len(eg) < 3 {
				eg = append(eg, n)
			}
		}
		named = append(named, fmt.Sprintf("%d places links led to (LinkTargets), e.g. %s, "+
			"which the host drops with LinkTargets.Forget (Workspace.ForgetLinkTargets) once it knows "+
			"no secret was written through a link to them", len(targets), strings.Join(eg, ", ")))
	}
	count := fmt.Sprintf("more than %d paths to hide", MaxHidden)
	if total > 0 {
		count = fmt.Sprintf("%d paths to hide, more than %d", total, MaxHidden)
	}
	if len(named) > 0 {
		count += ": " + strings.Join(named, ", ")
	}
	return count + "; no command can run until matches are removed (or places forgotten), " +
		"and commands cannot remove them: they must be removed from outside the sandbox (by the host)"
}

// relName is p relative to the workspace wsPath when beneath it, as
// error messages name it.
func relName(p, wsPath string) string {
	if wsPath != "" && within(p, wsPath) && p != wsPath {
		return strings.TrimPrefix(p, wsPath+"/") + " (in the workspace)"
	}
	return p
}

// pathSet is a set of clean absolute paths that tells whether a path
// is one of them or beneath one, in as many look-ups as the path has
// components.
type pathSet map[string]bool

func (s pathSet) add(p string) { s[p] = true }

// holds reports whether p is in s or beneath a path of s.
func (s pathSet) holds(p string) bool {
	for {
		if s[p] {
			return true
		}
		d := filepath.Dir(p)
		if d == p {
			return false
		}
		p = d
	}
}

// resolveHidden resolves a path to hide and checks it can be: "" when
// it does not exist; "/" or the workspace, where it leads, with an
// error. Set up (atSetUp: commands may have run), it follows
// no link in the workspace to a place outside it (see
// [resolveOutside]): a path that leads through one leads nowhere. A
// path that leads through links in the workspace (a command's) to a
// place in it, the workspace itself excluded, leads there: a command
// that planted a link at a path to hide before a secret was written
// there through it does not see what the link leads to.
func resolveHidden(seen lstats, path, wsPath string, atSetUp bool) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errors.New("want an absolute path")
	}
	var r string
	if atSetUp {
		var ok bool
		if r, ok = resolveOutside(seen, path, wsPath); !ok {
			if r, ok = resolveLinks(seen, path, wsPath, true); !ok || r == wsPath || !within(r, wsPath) {
				return "", nil
			}
		}
	} else {
		var err error
		r, err = filepath.EvalSymlinks(path)
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
	}
	switch {
	case r == "/":
		return r, errors.New("it is the whole file system")
	case wsPath != "" && r == wsPath:
		return r, errors.New("it is the workspace itself")
	}
	return r, nil
}

// maxLinks bounds the links resolveOutside follows, as the kernel does.
const maxLinks = 40

// resolveOutside follows the links of path (absolute), every component's,
// and returns where it leads; ok is false when it leads nowhere, through
// more than maxLinks links, or through a link in the workspace wsPath:
// the links there are the commands', and none is followed.
func resolveOutside(seen lstats, path, wsPath string) (resolved string, ok bool) {
	return resolveLinks(seen, path, wsPath, false)
}

// resolveLinks is resolveOutside, which follows the links in the
// workspace as well when inWorkspace.
func resolveLinks(seen lstats, path, wsPath string, inWorkspace bool) (resolved string, ok bool) {
	if !filepath.IsAbs(path) {
		return "", false
	}
	r, err := walkLinks(path, func(_, next string) (os.FileInfo, error) {
		fi, err := seen.lstat(next)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 && !inWorkspace && within(next, wsPath) {
			return nil, errors.New("a link in the workspace")
		}
		return fi, err
	})
	return r, err == nil
}

// walkLinks resolves path (absolute) from "/", one name at a time, and
// returns where it leads. step is called for each name reached, with
// the directory it is in (resolved) and the name's path there, and says
// what is there, as Lstat does; its error ends the walk. A link is
// followed (at most maxLinks: more fail with an error wrapping
// syscall.ELOOP, which does not name path), and ".." leads to the
// parent of the directory reached.
func walkLinks(path string, step func(dir, next string) (os.FileInfo, error)) (string, error) {
	todo := strings.Split(path, "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := step(cur, next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			// The caller names path: the error says why alone, as
			// the kernel's would (ELOOP).
			return "", fmt.Errorf("more than %d links on the way: %w", maxLinks, syscall.ELOOP)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

// isPattern reports whether a path to hide is a pattern (see
// filepath.Match).
func isPattern(h string) bool { return strings.ContainsAny(h, "*?[") }

// within reports whether path is dir or beneath it (both clean):
// everything is within "/". A workspace is never "/" (a sandbox around
// it is refused: see checkNotRoot), so nothing is taken to be in the
// workspace for that.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/") || dir == "/"
}

// CheckHide checks, before any sandbox is set up, that the paths to hide
// suit the workspace (absolute, resolved): each is absolute, can be
// resolved (links are followed; a missing path is left out), and is
// neither "/" nor the workspace itself (one that leads there through a
// link in the workspace leads nowhere: see [ResolveHide]). An ancestor
// of the workspace may be hidden: the workspace stays visible in it.
// [ResolveHide] checks the same and keeps what it resolved.
func CheckHide(hide []string, workspace string) error {
	_, err := ResolveHide(hide, workspace)
	return err
}
