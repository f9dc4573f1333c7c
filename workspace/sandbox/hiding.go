package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What the sandbox hides whatever the configuration, besides the
// workspace's surroundings (see [Surroundings]): the homes of the
// host's users, the secrets of the system (password hashes, old ones
// too, host and TLS private keys), its logs, spools and backups, and
// its run-time state (/run): the Unix sockets of its daemons (a
// container engine's, the service manager's, the system bus), which a
// command with the network allowed could otherwise connect to, and the
// credentials handed to services. With the network allowed, the name
// resolver's configuration stays visible where it leads into /run (see
// [KeptWithNetwork]). An entry may be a pattern (filepath.Match). A
// hidden path that holds the workspace shows only the directories on
// the way to it.
//
// The host's shared memory (/dev/shm) and message queues (/dev/mqueue)
// are not listed: no sandbox runs without a /dev of its own (the set-up
// fails when one cannot be made), which holds neither of the host's,
// and whose /dev/shm, an empty writable tmpfs of the sandbox's own,
// hiding would only make unusable.
var DefaultHidden = []string{
	"/root", "/home",
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
	"/var/log", "/var/spool", "/var/backups",
	"/run", "/var/run",
}

// KeptWithNetwork lists the files that stay visible when the network
// is allowed though a directory of [DefaultHidden] holds what they lead
// to: the name resolver's configuration, often a link into /run. What
// such a file leads to is shown at its own path in the directory that
// hides the rest, and nothing beside it, when it is a regular file, no
// link on the way to it is in the workspace (links there are the
// commands'), and no other hidden path ([Config.Hide], the workspace's
// surroundings) covers it. The host reads it as it opens each sandbox.
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
// are the system's, out of the commands' reach. defaults are
// [DefaultHidden]; others are the rest.
func hideList(wsPath string) (defaults, others []string) {
	if s := Surroundings(wsPath); s != "" && s != "/tmp" { // /tmp is the sandbox's own
		others = append(others, s)
	}
	return DefaultHidden, others
}

// HiddenPath is an entry of [Config.Hide] as [ResolveHide] found it,
// before any command ran: its path with the links on the way to it
// followed, and the identity (device and inode) of what was there.
// A sandbox hides that path, not what the entry's links lead to by
// then: commands may have changed those. Beneath the workspace, where
// commands can rename and replace things, the set-up refuses to run a
// command when the path no longer holds what was found there
// ([ErrHiddenMoved]).
type HiddenPath struct {
	Path string `json:"path"`
	// Dev and Ino are 0 when nothing was there, and for a pattern
	// (kept besides what it matched): the entry is then resolved, or
	// matched, again at each set-up, and what it leads to or matches by
	// then is hidden. A link in the workspace (a command's) is not
	// followed then: an entry that leads through one leads nowhere, a
	// match that is one is left out; so is a link outside it (in a
	// workspace that holds it, say) that leads to "/", the workspace or
	// an ancestor of it, a system directory, or into the software
	// (/usr, /bin, …); a match that is not a directory
	// (a FIFO, say) holds nothing to match the next component in. The
	// set-up fails ([ErrConfig], saying which pattern and directory)
	// when the patterns match more than 1024 paths in all, or make it
	// read more than 65536 directory entries in all: it does not hide
	// only some of what they match, and does not spend unbounded time
	// on what commands made. Every later set-up fails too, until files
	// are removed (from outside the sandbox, which hides the matches)
	// or the pattern is narrowed (a workspace opened again with it).
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
	// Recorded marks an identity [RecordMatches] added: of a path
	// found after ResolveHide.
	Recorded bool `json:"recorded,omitempty"`
}

// ErrHiddenMoved is wrapped by the set-up error of a sandbox that
// refused to run its command because a path to hide beneath the
// workspace was moved or replaced (by an earlier command, say) since
// [ResolveHide]: what it held may now be elsewhere, visible. Someone
// must put it back, or open the workspace again.
var ErrHiddenMoved = errors.New("a hidden path in the workspace was moved or replaced")

// ResolveHide checks hide against the workspace as [CheckHide] does
// and resolves it once and for all: patterns expanded, links followed,
// the identity of each path that exists recorded. A pattern is kept
// too, to be matched again by each set-up (following no link in the
// workspace, and within bounds: see [HiddenPath]). The result is what
// a [Config]'s Resolved field wants.
func ResolveHide(hide []string, workspace string) ([]HiddenPath, error) {
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil, fmt.Errorf("%w: workspace %s: %v", ErrConfig, workspace, err)
	}
	var out []HiddenPath
	for i, h := range hide {
		if !filepath.IsAbs(h) {
			return nil, fmt.Errorf("%w: Hide[%d] = %q: want an absolute path", ErrConfig, i, h)
		}
		matches := []string{h}
		if isPattern(h) {
			if matches, err = filepath.Glob(h); err != nil {
				return nil, fmt.Errorf("%w: Hide[%d] = %q: %v", ErrConfig, i, h, err)
			}
			if hp := (HiddenPath{Path: filepath.Clean(h)}); !slices.Contains(out, hp) {
				out = append(out, hp)
			}
		}
		for _, m := range matches {
			r, err := resolveHidden(m, ws, false)
			if err != nil {
				return nil, fmt.Errorf("%w: Hide[%d] = %q: %v", ErrConfig, i, h, err)
			}
			hp := HiddenPath{Path: filepath.Clean(m)}
			if r != "" {
				fi, err := os.Lstat(r)
				if err != nil {
					return nil, fmt.Errorf("%w: Hide[%d] = %q: %v", ErrConfig, i, h, err)
				}
				hp.Path = r
				hp.Dev, hp.Ino = fileID(fi)
			}
			if !slices.Contains(out, hp) {
				out = append(out, hp)
			}
		}
	}
	return out, nil
}

// MaxRecorded bounds how many identities [RecordMatches] adds.
const MaxRecorded = 1024

// RecordMatches returns resolved ([ResolveHide]'s) with the identities
// of what its patterns, and its paths missing when it was resolved,
// lead to in the workspace (absolute, resolved) now, as ResolveHide
// records those it found: a set-up then refuses to run a command once
// such a path was moved or replaced ([ErrHiddenMoved]), rather than
// leave what it held visible under its new name. It is meant to be
// called right before each set-up, with what it returned the last
// time. Links in the workspace are not followed (see [HiddenPath]),
// paths outside the workspace are not recorded, and at most
// [MaxRecorded] identities are added in all (past that, and when
// matching goes past its bounds, resolved is returned as it is: the
// set-up matches again and fails past the bounds).
func RecordMatches(resolved []HiddenPath, workspace string) []HiddenPath {
	recorded := 0
	for _, f := range resolved {
		if f.Recorded {
			recorded++
		}
	}
	out := resolved
	budget := matchBudget{entries: maxMatchEntries, matches: maxMatches}
	for _, f := range resolved {
		if f.Dev != 0 || f.Ino != 0 {
			continue
		}
		var found []string
		if isPattern(f.Path) {
			m, err := matchAtSetUp(f.Path, workspace, &budget)
			if err != nil {
				return out
			}
			found = m
		} else if r, ok := hideTarget(f.Path, workspace); ok {
			found = []string{r}
		}
		for _, r := range found {
			if r == workspace || !within(r, workspace) ||
				slices.ContainsFunc(out, func(h HiddenPath) bool { return h.Path == r && (h.Dev != 0 || h.Ino != 0) }) {
				continue
			}
			fi, err := os.Lstat(r)
			if err != nil {
				continue
			}
			if recorded >= MaxRecorded {
				return out
			}
			hp := HiddenPath{Path: r, Recorded: true}
			if hp.Dev, hp.Ino = fileID(fi); hp.Dev == 0 && hp.Ino == 0 {
				continue
			}
			if len(out) == len(resolved) {
				out = slices.Clone(resolved)
			}
			out = append(out, hp)
			recorded++
		}
	}
	return out
}

// hidePlan is what to cover, resolved: paths outside the workspace
// (ancestors of the workspace among them) and paths inside it, covered
// once it is mounted; ids are the identities ResolveHide recorded;
// missing are the entries to resolve again once the workspace is
// mounted: those that led nowhere (a path that does not exist) and the
// patterns.
type hidePlan struct {
	outside, inside, ancestors, missing []string
	ids                                 map[string]HiddenPath
}

// ErrConfig is wrapped by the errors that come from a configuration the
// sandbox cannot honour, not from what the kernel lacks.
var ErrConfig = errors.New("sandbox configuration")

// planHiding resolves list (links followed, patterns expanded, missing
// paths left out) around the workspace wsPath (resolved), and adds the
// paths fixed resolved once (those missing then resolved again now).
func planHiding(list []string, fixed []HiddenPath, wsPath string) (hidePlan, error) {
	var resolved, missing []string
	ids := map[string]HiddenPath{}
	for _, f := range fixed {
		if f.Dev == 0 && f.Ino == 0 {
			list = append(list, f.Path)
			continue
		}
		ids[f.Path] = f
		if !slices.Contains(resolved, f.Path) {
			resolved = append(resolved, f.Path)
		}
	}
	budget := matchBudget{entries: maxMatchEntries, matches: maxMatches}
	for _, h := range list {
		if isPattern(h) {
			// Matched again once the workspace is mounted, too: beneath
			// /tmp it is not there before.
			missing = append(missing, h)
			matches, err := matchAtSetUp(h, wsPath, &budget)
			if errors.Is(err, errChanged) {
				return hidePlan{}, fmt.Errorf("%w: hide %s: %v", ErrHiddenMoved, h, err)
			}
			if err != nil {
				return hidePlan{}, fmt.Errorf("%w: hide %s: %v", ErrConfig, h, err)
			}
			for _, r := range matches {
				if err := checkHidden(r, wsPath); err != nil {
					return hidePlan{}, fmt.Errorf("%w: hide %s: %v", ErrConfig, h, err)
				}
				if !slices.Contains(resolved, r) {
					resolved = append(resolved, r)
				}
			}
			continue
		}
		r, err := resolveHidden(h, wsPath, true)
		if err != nil {
			return hidePlan{}, fmt.Errorf("%w: hide %s: %v", ErrConfig, h, err)
		}
		if r == "" {
			missing = append(missing, h)
		} else if !slices.Contains(resolved, r) {
			resolved = append(resolved, r)
		}
	}
	// Parents first: what is beneath a hidden directory is hidden with
	// it, except beneath the workspace, which stays visible.
	slices.SortFunc(resolved, func(a, b string) int { return len(a) - len(b) })
	plan := hidePlan{ids: ids, missing: missing}
	for _, r := range resolved {
		if within(r, wsPath) {
			if !slices.ContainsFunc(plan.inside, func(k string) bool { return within(r, k) }) {
				plan.inside = append(plan.inside, r)
			}
			continue
		}
		if slices.ContainsFunc(plan.outside, func(k string) bool { return within(r, k) }) {
			continue
		}
		plan.outside = append(plan.outside, r)
		if within(wsPath, r) {
			plan.ancestors = append(plan.ancestors, r)
		}
	}
	return plan, nil
}

// resolveHidden resolves a path to hide and checks it can be: "" when
// it does not exist. Set up (atSetUp: commands may have run), it follows
// no link in the workspace (see [resolveOutside]): a path that leads
// through one leads nowhere.
func resolveHidden(path, wsPath string, atSetUp bool) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errors.New("want an absolute path")
	}
	var r string
	if atSetUp {
		var ok bool
		if r, ok = hideTarget(path, wsPath); !ok {
			return "", nil
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
	return r, checkHidden(r, wsPath)
}

// checkHidden checks that the resolved path r can be hidden around the
// workspace wsPath: it is neither "/" nor the workspace itself.
func checkHidden(r, wsPath string) error {
	switch {
	case r == "/":
		return errors.New("it is the whole file system")
	case wsPath != "" && r == wsPath:
		return errors.New("it is the workspace itself")
	}
	return nil
}

// isPattern reports whether a path to hide is a pattern.
func isPattern(h string) bool { return strings.ContainsAny(h, "*?[") }

// The work of matching the patterns to hide at one set-up is bounded,
// since commands may fill the directories they list: at most
// maxMatchEntries directory entries read, and maxMatches paths matched
// (each is a mount).
const (
	maxMatchEntries = 1 << 16
	maxMatches      = 1024
)

// matchBudget is what is left of the work of matching at a set-up.
type matchBudget struct{ entries, matches int }

// errTooMany is the error of a set-up whose patterns to hide match, or
// make it read, more than it may.
var errTooMany = errors.New("too many paths to match")

// matchAtSetUp expands pattern (absolute) as filepath.Glob does, at a
// set-up, when commands may have run: it follows no link in the
// workspace wsPath (a match that is one, or is reached through one, is
// left out: see [resolveOutside]), and spends at most what is left of
// budget, failing with errTooMany past it. The matches are resolved
// paths that exist.
func matchAtSetUp(pattern, wsPath string, budget *matchBudget) ([]string, error) {
	paths := []string{"/"}
	for _, c := range strings.Split(filepath.Clean(pattern), "/")[1:] {
		if _, err := filepath.Match(c, ""); err != nil {
			return nil, err
		}
		var next []string
		seen := map[string]bool{}
		for _, p := range paths {
			names := []string{c}
			if isPattern(c) {
				var err error
				if names, err = readNames(p, budget, within(p, wsPath)); err != nil {
					return nil, err
				}
			}
			for _, n := range names {
				if ok, _ := filepath.Match(c, n); isPattern(c) && !ok {
					continue
				}
				r, ok, err := stepOutside(p, n, wsPath)
				if err != nil && isPattern(c) && within(p, wsPath) {
					// Listed, and gone already: renamed meanwhile.
					return nil, fmt.Errorf("%w: %s", errChanged, filepath.Join(p, n))
				}
				if ok && !seen[r] {
					seen[r] = true
					next = append(next, r)
				}
			}
		}
		paths = next
	}
	if budget.matches -= len(paths); budget.matches < 0 {
		return nil, fmt.Errorf("%w: the patterns to hide match over %d paths (this one %d); "+
			"remove matching files (from outside the sandbox: commands cannot see them) or narrow the pattern",
			errTooMany, maxMatches, len(paths))
	}
	return paths, nil
}

// stepOutside is the entry name of the directory dir (resolved: no
// link on the way), resolved as [hideTarget] does; ok is false when
// it does not exist (err says so) or leads nowhere.
func stepOutside(dir, name, wsPath string) (string, bool, error) {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false, err
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		return p, true, nil
	}
	r, ok := hideTarget(p, wsPath)
	return r, ok, nil
}

// errChanged is the error of matching a pattern in a directory of the
// workspace that a command changed meanwhile: what was listed may have
// been missed under another name.
var errChanged = errors.New("the workspace changed while the patterns to hide were matched")

// readNames lists the directory dir (resolved: no link), spending the
// budget's entries; one that cannot be listed holds nothing, and so does
// anything but a directory (a command's FIFO, say, which is never opened
// for reading: that would wait for a writer).
//
// When watch (a directory of the workspace, which commands change), a
// directory changed while it was listed (its modification time says
// so) fails with errChanged: a name renamed meanwhile may have been
// listed under neither name.
func readNames(dir string, budget *matchBudget, watch bool) ([]string, error) {
	f, err := openDirToList(dir)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, nil
	}
	var names []string
	for {
		batch, err := f.Readdirnames(256)
		if budget.entries -= len(batch); budget.entries < 0 {
			return nil, fmt.Errorf("%w: the patterns to hide list directories of over %d entries in all (%s among them); "+
				"remove files from %s or narrow the pattern", errTooMany, maxMatchEntries, dir, dir)
		}
		names = append(names, batch...)
		if err != nil {
			break
		}
	}
	if after, err := f.Stat(); watch && (err != nil || !after.ModTime().Equal(before.ModTime())) {
		return nil, fmt.Errorf("%w: %s", errChanged, dir)
	}
	return names, nil
}

// softwareDirs hold the software commands run: a link followed at a
// set-up that leads into one leads nowhere (see [hideTarget]).
var softwareDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store", "/gnu/store", "/snap"}

// hideTarget is path resolved at a set-up as [resolveOutside] does, for
// hiding: a path whose links (outside the workspace, in a workspace
// that holds it, say, whose commands make them) lead to "/", to the
// workspace or one of its ancestors, to a system directory or into the
// software leads nowhere, rather than fail the set-up or hide what
// commands need.
func hideTarget(path, wsPath string) (string, bool) {
	r, ok := resolveOutside(path, wsPath)
	if !ok || r == filepath.Clean(path) {
		return r, ok
	}
	if within(wsPath, r) || slices.Contains(systemDirs, r) ||
		slices.ContainsFunc(softwareDirs, func(d string) bool { return within(r, d) }) {
		return "", false
	}
	return r, true
}

// maxLinks bounds the links resolveOutside follows, as the kernel does.
const maxLinks = 40

// resolveOutside follows the links of path (absolute), every component's,
// and returns where it leads; ok is false when it leads nowhere, through
// more than maxLinks links, or through a link in the workspace wsPath:
// the links there are the commands', and none is followed.
func resolveOutside(path, wsPath string) (resolved string, ok bool) {
	if !filepath.IsAbs(path) {
		return "", false
	}
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
		fi, err := os.Lstat(next)
		if err != nil {
			return "", false
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks || within(next, wsPath) {
			return "", false
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", false
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, true
}

// within reports whether path is dir or beneath it (both clean).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/") || dir == "/"
}

// CheckHide checks, before any sandbox is set up, that the paths to hide
// suit the workspace (absolute, resolved): each is absolute, can be
// resolved (links are followed; a missing path is left out), and is
// neither "/" nor the workspace itself. An ancestor of the workspace may
// be hidden: the workspace stays visible in it. [ResolveHide] checks
// the same and keeps what it resolved.
func CheckHide(hide []string, workspace string) error {
	_, err := ResolveHide(hide, workspace)
	return err
}
