package agent

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// SessionKey returns the name under which an agent named name keeps
// session sessionID in its Store (an empty name is [DefaultName]): the
// name, with '%' and '/' written as %25 and %2F, then '/' and the
// session id. Keys of different names or ids never clash (nor with the
// record of a session's calls held for approval, its key +
// tools.ApprovalStoreSuffix: an agent with a Store refuses session ids
// ending with that suffix, [ErrInvalidSessionID]), and a key
// depends on nothing but the two, so an agent started again with the
// same Name resumes its sessions in any process. Hosts pass it to what
// reads a session of the store directly (tools.ReadSession,
// tools.DeleteSession, tools.ReadApprovals).
func SessionKey(name, sessionID string) string {
	if name == "" {
		name = DefaultName
	}
	return keyEscaper.Replace(name) + "/" + sessionID
}

var keyEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

var keyUnescaper = strings.NewReplacer("%25", "%", "%2F", "/")

// splitKey returns the name and the session id of key when key is
// [SessionKey] of some name and id: the name, escaped, then '/'.
func splitKey(key string) (name, sessionID string, ok bool) {
	escaped, sessionID, found := strings.Cut(key, "/")
	name = keyUnescaper.Replace(escaped)
	if !found || escaped == "" || keyEscaper.Replace(name) != escaped {
		return "", "", false // SessionKey never writes it
	}
	return name, sessionID, true
}

// keyOwner returns the name of the agent whose session key id is: id is
// [SessionKey] of this agent's name, or of the name of another agent
// open on the same Store value in this process. Those keys hold that
// agent's current sessions, never a session an earlier version stored
// under a bare id.
func (a *Agent) keyOwner(id string) (name, sessionID string, ok bool) {
	name, sessionID, ok = splitKey(id)
	switch {
	case !ok:
		return "", "", false
	case name == a.Name():
		return name, sessionID, true
	}
	store := a.claimStore // opts.Store may be it measured: names are claimed on it
	if store == nil || !reflect.TypeOf(store).Comparable() {
		return "", "", false
	}
	claimed.Lock()
	defer claimed.Unlock()
	if claimed.names[storeName{store: store, name: name}] {
		return name, sessionID, true
	}
	return "", "", false
}

// checkSession is the package's checkSession and, with a Store, refuses
// an id whose key would be a record the store keeps under another
// session's key: the key of session id + tools.ApprovalStoreSuffix holds
// the calls of session id held for approval (the only name a session
// keeps besides its key).
func (a *Agent) checkSession(id string) error {
	if err := checkSession(id); err != nil {
		return err
	}
	if a.opts.Store != nil && strings.HasSuffix(id, tools.ApprovalStoreSuffix) {
		return fmt.Errorf("%w: %q ends with %q: with a Store, the key of session %q holds the calls of session %q held for approval",
			ErrInvalidSessionID, clip(id), tools.ApprovalStoreSuffix, clip(id), clip(strings.TrimSuffix(id, tools.ApprovalStoreSuffix)))
	}
	if a.opts.Store != nil {
		return keyFits(a.Name(), id)
	}
	return nil
}

// keyFits returns an error wrapping ErrInvalidSessionID when the key of
// session id of the agent named name, with tools.ApprovalStoreSuffix
// (the key of its calls held for approval, the longest name the session
// keeps), is longer than durability.MaxNameLen, the longest actor name
// every store of the module takes: such a session would be refused by
// some stores (pgstore, memstore) and not by others, or refused by its
// store only once it holds calls for approval.
func keyFits(name, id string) error {
	key := len(SessionKey(name, id))
	if longest := key + len(tools.ApprovalStoreSuffix); longest > durability.MaxNameLen {
		inKey := key - len("/") - len(id) // the name as the key writes it
		room := max(durability.MaxNameLen-inKey-len("/")-len(tools.ApprovalStoreSuffix), 0)
		return fmt.Errorf("%w: %q is %d bytes long; with the agent's name of %d bytes (%d in a key), its keys in the Store take up to %d bytes, more than the %d every store takes (durability.MaxNameLen): this agent takes ids of up to %d bytes",
			ErrInvalidSessionID, clip(id), len(id), len(name), inKey, longest, durability.MaxNameLen, room)
	}
	return nil
}

// maxNameInKey is the longest an agent's name may be, as a key writes it
// ([SessionKey]), with a Store: it leaves room for a session id of one
// byte in the key of that session's calls held for approval, the longest
// key a session has (see keyFits).
const maxNameInKey = durability.MaxNameLen - len("/x") - len(tools.ApprovalStoreSuffix)

// nameFits returns an error wrapping durability.ErrInvalidName when the
// agent named name, with a Store, could keep no session within
// durability.MaxNameLen (see keyFits): every session id would be refused.
func nameFits(name string) error {
	inKey := len(SessionKey(name, "")) - len("/")
	if inKey <= maxNameInKey {
		return nil
	}
	return fmt.Errorf("agent %q: %w: its Name is %d bytes long, %d in a key ('%%' and '/' are written in 3), which leaves no room for a session id: with a Store, a session is kept under <name>/<session id> and its calls held for approval under <name>/<session id>%s, at most %d bytes (durability.MaxNameLen), so a Name takes up to %d bytes in a key",
		clip(name), durability.ErrInvalidName, len(name), inKey, tools.ApprovalStoreSuffix, durability.MaxNameLen, maxNameInKey)
}

// SessionKey is [SessionKey] of the agent's name and sessionID.
func (a *Agent) SessionKey(sessionID string) string {
	return SessionKey(a.Name(), sessionID)
}

// storeClaim is an open agent's hold of its name on a Store.
type storeClaim struct {
	key  storeName
	once sync.Once
}

// storeName is a Store value and an agent name on it.
type storeName struct {
	store durability.Store
	name  string
}

// claimed holds the names that open agents use on each Store value of
// the process.
var claimed = struct {
	sync.Mutex
	names map[storeName]bool
}{names: map[storeName]bool{}}

// StoreWrapper is what a Store that wraps another (to measure or log its
// calls, say) implements to say which one: [New] sees through it, so
// that agents on wrappers of one store are known to share that store
// (see [ErrNameTaken]), however many wrappers each has.
type StoreWrapper interface {
	Unwrap() durability.Store
}

// maxUnwraps bounds the wrappers innermost sees through: a wrapper that
// wraps itself ends the chain there.
const maxUnwraps = 64

// innermost returns the store that store wraps, through every
// [StoreWrapper]: the store the agent's sessions are in.
func innermost(store durability.Store) durability.Store {
	for range maxUnwraps {
		w, ok := store.(StoreWrapper)
		if !ok {
			break
		}
		inner := w.Unwrap()
		if inner == nil {
			break
		}
		store = inner
	}
	return store
}

// claimName takes name on store for a new agent, or fails with
// ErrNameTaken while an open agent holds it. A store that is nil, or of a
// type whose values cannot be compared (so that the same store cannot be
// told), is not claimed: it returns nil.
func claimName(store durability.Store, name string) (*storeClaim, error) {
	if store == nil || !reflect.TypeOf(store).Comparable() {
		return nil, nil
	}
	key := storeName{store: store, name: name}
	claimed.Lock()
	defer claimed.Unlock()
	if claimed.names[key] {
		return nil, fmt.Errorf("agent %q: %w: give each agent on one Store a Name of its own (its sessions are kept under it), or Close the other first", clip(name), ErrNameTaken)
	}
	claimed.names[key] = true
	return &storeClaim{key: key}, nil
}

// release gives the name back; later calls do nothing. A nil claim has
// nothing to give back.
func (c *storeClaim) release() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		claimed.Lock()
		delete(claimed.names, c.key)
		claimed.Unlock()
	})
}
