package workspace

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// UndoToolName is the name of the tool [Journal.UndoTool] makes.
const UndoToolName = "undo_changes"

// JournalStoreSuffix is what an earlier version appended to a session id
// to name its journal in the store (now [JournalKey]). That name could be
// an agent's session key (agent.SessionKey of agent "s", session "undo"
// is "s/undo", the old name of session "s"'s journal); a journal found
// under it is moved to [JournalKey] when its session is first read (see
// [Journal]).
//
// Deprecated: journals are stored under [JournalKey].
const JournalStoreSuffix = "/undo"

// journalKeyPrefix starts every [JournalKey]: the byte 0xFF, which
// no UTF-8 text holds, then "undo/". A tool loop's session is stored
// under its id (tools.SessionOptions.ID; an agent's is agent.SessionKey),
// which its events hold as a protobuf string, which must be UTF-8: no
// session, bare or an agent's, can be stored under a journal's key.
const journalKeyPrefix = "\xffundo/"

// journalKeyPrefixV1 started the journal keys of the previous version:
// a bare tools.Loop session could have that id. A journal found there is
// moved to [JournalKey] (see [Journal]).
const journalKeyPrefixV1 = "%undo/"

// JournalKey returns the name under which the journal named name (see
// JournalOptions.Name; empty is agent.DefaultName) keeps the writes of
// session in its store: the byte 0xFF, "undo/", the name with '%' and
// '/' written as %25 and %2F, '/', then the session id. It is not UTF-8
// text, so it never is the name of a tool loop's session (any
// tools.SessionOptions.ID, agent.SessionKey included: a session's id is
// stored in its events as a protobuf string, which must be UTF-8), nor
// the key of another journal name or session.
func JournalKey(name, session string) string {
	return journalKeyPrefix + journalKeyRest(name, session)
}

// journalKeyRest is what follows the prefix of a journal's key.
func journalKeyRest(name, session string) string {
	if name == "" {
		name = agent.DefaultName
	}
	return journalNameEscaper.Replace(name) + "/" + session
}

var journalNameEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// maxJournalNameInKey is the longest a journal's name may be, as its
// keys write it: a [JournalKey] of that name and of a session id of one
// byte is durability.MaxNameLen bytes long.
const maxJournalNameInKey = durability.MaxNameLen - len(journalKeyPrefix) - len("/x")

// journalNameFits returns an error wrapping durability.ErrInvalidName
// when the journal named name can record no session's writes: its key
// would pass durability.MaxNameLen whatever the session id. What a
// store holds under such a name already is still read (see load).
func journalNameFits(name string) error {
	inKey := len(journalKeyRest(name, "")) - len("/")
	if inKey <= maxJournalNameInKey {
		return nil
	}
	return fmt.Errorf("workspace: journal: a Name of %d bytes, %d in a key ('%%' and '/' are written in 3): %w: "+
		"a journal keeps a session's writes under JournalKey (0xFF, \"undo/\", the name, '/', the session id), "+
		"at most %d bytes (durability.MaxNameLen), so a Name takes up to %d bytes in a key; "+
		"such a journal records no new session (what a store holds under it is still read and undone): name the journal as its agent",
		len(name), inKey, durability.ErrInvalidName, durability.MaxNameLen, maxJournalNameInKey)
}

// keyFits returns an error wrapping durability.ErrInvalidName when the
// key of session's journal passes durability.MaxNameLen: some stores
// would refuse it (memstore, pgstore) and others not, so that the
// journal could not move to any store. A journal named as its agent
// (JournalOptions.Name) has room for every session the agent takes with
// a Store: the key of the session's calls held for approval
// (agent.SessionKey and tools.ApprovalStoreSuffix) is longer than its
// journal's key.
func (j *Journal) keyFits(session string) error {
	key := len(j.key(session))
	if key <= durability.MaxNameLen {
		return nil
	}
	if err := journalNameFits(j.name); err != nil {
		return err
	}
	inKey := len(journalKeyRest(j.name, "")) - len("/")
	return fmt.Errorf("journal: a session id of %d bytes: %w: with the journal's Name of %d bytes (%d in a key), "+
		"the session's JournalKey is %d bytes, more than the %d every store takes (durability.MaxNameLen): "+
		"this journal takes ids of up to %d bytes; named as its agent (JournalOptions.Name), it takes every id the agent does",
		len(session), durability.ErrInvalidName, len(cmp.Or(j.name, agent.DefaultName)), inKey, key, durability.MaxNameLen,
		max(durability.MaxNameLen-len(journalKeyPrefix)-inKey-len("/"), 0))
}

// Errors of [Journal.Undo].
var (
	// ErrChangedSince: a file the undo would restore was changed by
	// something else after the session wrote it; nothing was restored.
	ErrChangedSince = errors.New("workspace: undo refused: a file changed since the session wrote it")
	// ErrNoSuchCall: the session has no write (not undone yet) of that
	// call.
	ErrNoSuchCall = errors.New("workspace: undo: no recorded write of that call")
	// ErrNotKept: the content a write replaced was too large to keep.
	ErrNotKept = errors.New("workspace: undo refused: the replaced content was too large to keep")
)

// JournalOptions configure [NewJournal]. A nil *JournalOptions or a zero
// field means the default.
type JournalOptions struct {
	// SessionOf names the session of a call from its stream id; default:
	// the session of an agent's stream id, read by agent.SessionOf (its
	// streams are agent.StreamID: the session, with '#' and '%' escaped,
	// then "#<attempt>" past the first attempt).
	SessionOf func(stream string) string
	// Name keeps the journal apart from other journals in its store (see
	// [JournalKey]); default agent.DefaultName. A journal records the
	// sessions of one agent: the session ids of two agents may be the
	// same, and a journal shared by both would undo one's writes at the
	// other's request. Give each agent a journal of its own, named as the
	// agent (agent.Options.Name). A journal's keys hold its Name and the
	// session id, within durability.MaxNameLen bytes, the longest name
	// every store takes: the journal records no session whose key
	// would be longer, none at all when the Name leaves no room for a
	// session id (their writes are refused, not done, with errors
	// wrapping durability.ErrInvalidName that say the lengths), though
	// what a store holds under such a key (written by an earlier
	// version) is still listed and undone. Named as its agent, it takes every
	// session the agent takes with a Store.
	Name string
}

// Journal makes write_file undoable: before each write it records, per
// session, in a durability store (the session's own store works: the
// journal of a session is named [JournalKey], which no tool loop's
// session, an agent's or a bare one, is stored under), what the write replaces (the previous content and permissions, or that there was no
// file) and a hash of the new content. [Journal.Undo] restores the files
// to their state before a given call, across restarts, and refuses when a
// file was changed since by something else.
//
// run_command stays irreversible: a command may change anything under
// the root (and, through the network, outside it), and the sandbox runs
// it on the real directory, not on a copy-on-write view whose changes
// could be kept or dropped; recording a whole tree before every command
// would cost more than the command. Approval (package approval) is the
// control for commands.
//
// A journal an earlier version stored elsewhere, under "%undo/<name>/<session>"
// (where a bare tools.Loop session may be stored too) or, before that,
// under <session>[JournalStoreSuffix] (where an agent's session may be),
// is moved to [JournalKey] when its session is first read, in one
// atomic write, if every event there reads as a journal's (a session
// stored under that name is left as it is, never read as a journal).
// The old name is emptied afterwards; a copy left there (the process
// stopped in between) is deleted when the session is first read again,
// if its events are the very bytes of the journal's at the same indexes.
// A journal whose [JournalKey] would pass durability.MaxNameLen is not
// moved (no write makes such a key): it is read, undone and recorded
// under its old name.
//
// A Journal records the writes of one agent (see JournalOptions.Name).
// It is safe for concurrent use; its writes are serialized.
type Journal struct {
	ws        *Workspace
	store     durability.Store
	sessionOf func(string) string
	name      string

	mu   sync.Mutex
	next map[string]uint64 // per session: the index of its next event
	// kept holds, per session whose journal an earlier version stored
	// under a name it is not moved from (see moveFrom), that name,
	// where the journal is read and grows (keyOf).
	kept map[string]string
}

// NewJournal returns a journal of ws's writes in store (which the caller
// owns and closes).
func NewJournal(ws *Workspace, store durability.Store, o *JournalOptions) (*Journal, error) {
	if ws == nil || store == nil {
		return nil, errors.New("workspace: journal needs a workspace and a store")
	}
	j := &Journal{ws: ws, store: store, sessionOf: defaultSessionOf, next: map[string]uint64{}, kept: map[string]string{}}
	if o != nil && o.SessionOf != nil {
		j.sessionOf = o.SessionOf
	}
	if o != nil {
		j.name = o.Name
	}
	return j, nil
}

// defaultSessionOf reads the session off a stream id an agent made, as
// package agent reads it.
func defaultSessionOf(stream string) string {
	session, _ := agent.SessionOf(stream)
	return session
}

// journalEvent is one stored event: a write, or an undo of the writes
// with indexes [UndoFrom, UndoTo).
type journalEvent struct {
	Write    *writeRecord `json:"write,omitempty"`
	UndoFrom uint64       `json:"undo_from,omitempty"`
	UndoTo   uint64       `json:"undo_to,omitempty"`
}

type writeRecord struct {
	CallID  string      `json:"call_id"`
	Path    string      `json:"path"` // the root-relative file written
	Existed bool        `json:"existed"`
	Prev    []byte      `json:"prev,omitempty"`
	Perm    fs.FileMode `json:"perm,omitempty"`
	NotKept bool        `json:"not_kept,omitempty"`
	NewHash string      `json:"new_hash"`
}

func (r *writeRecord) prevHash() string {
	if !r.Existed {
		return ""
	}
	return hashOf(r.Prev)
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Tools returns ws's tools (see [Tools]) with a write_file that records
// into the journal.
func (j *Journal) Tools() ([]*tools.Tool, error) {
	all, err := Tools(j.ws)
	if err != nil {
		return nil, err
	}
	for i, t := range all {
		if t.Name() != WriteFileToolName {
			continue
		}
		def := t.Definition()
		def.Handler = nil
		if all[i], err = tools.NewTyped(def, markFailed(j.writeFile)); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// UndoInput is the argument of the undo tool.
type UndoInput struct {
	CallID string `json:"call_id,omitempty" jsonschema:"the id of the first write_file call to undo (it and every later write of this conversation are undone); empty undoes every write of this conversation"`
}

// UndoResult is the undo tool's result.
type UndoResult struct {
	Success  bool       `json:"success"`
	Restored []Restored `json:"restored,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// UndoTool is a tool a host may give the model: it undoes the writes of
// the calling conversation (all of them, or from a call on). It is
// irreversible (approval's default policy asks before it runs). A failed
// undo is an error result of the call whose JSON is its [UndoResult]
// (what was restored before it failed, and why): of kind not_found for
// a call of which the session has no write ([ErrNoSuchCall]),
// invalid_arguments when the undo was refused ([ErrChangedSince],
// [ErrNotKept]), handler_error when the workspace or the journal failed.
func (j *Journal) UndoTool() (*tools.Tool, error) {
	return tools.NewTyped(tools.Definition{Name: UndoToolName,
		Description:  "Undo the files this conversation wrote with write_file: restore them as they were before the given call (or before the first write). Refused when a file was changed since by something else.",
		Capabilities: []string{"write"}, Irreversible: true},
		func(ctx context.Context, in UndoInput) (UndoResult, error) {
			info, _ := tools.CallFrom(ctx)
			restored, err := j.Undo(ctx, j.sessionOf(info.StreamID), in.CallID)
			if err != nil {
				out := UndoResult{Restored: restored, Error: err.Error()}
				return out, undoFailed(out, err)
			}
			return UndoResult{Success: true, Restored: restored}, nil
		})
}

// undoFailed is the error that answers an undo call with the
// unsuccessful result out as an error result, as [failedResult] does for
// the other tools: kind tools.FailureNotFound when the call named a
// write the session does not have ([ErrNoSuchCall]) and
// tools.FailureInvalidArguments when it asked for what cannot be undone
// ([ErrChangedSince], [ErrNotKept]), neither of which counts against the
// tool's circuit breaker, and tools.FailureHandler when the workspace or
// the journal failed. A file the workspace refused to read or restore
// is answered as write_file's refusal with the same reason is (see
// failedResult): a path hidden from commands while a command runs
// (ReasonHiddenInUse), say, is a call that cannot be done now, not a
// broken tool.
func undoFailed(out UndoResult, err error) error {
	payload, merr := marshal(out, len(out.Error)+64*len(out.Restored))
	if merr != nil {
		return err
	}
	kind := tools.FailureHandler
	var re *refusedError
	switch {
	case errors.Is(err, ErrNoSuchCall):
		kind = tools.FailureNotFound
	case errors.Is(err, ErrChangedSince), errors.Is(err, ErrNotKept):
		kind = tools.FailureInvalidArguments
	case errors.As(err, &re):
		kind = failureKind(re.reason)
	}
	return &tools.ResultError{Payload: payload, Kind: kind, Err: err}
}

// writeFile records what the write replaces, then writes.
func (j *Journal) writeFile(ctx context.Context, in WriteFileInput) (WriteFileResult, error) {
	info, ok := tools.CallFrom(ctx)
	if !ok {
		return WriteFileResult{}, errors.New("journal: write_file run outside a tool call")
	}
	session := j.sessionOf(info.StreamID)
	j.mu.Lock()
	defer j.mu.Unlock()
	// Recorded from the very target the write resolved, once: a link
	// retargeted meanwhile cannot make the journal hold another file
	// than the one written (the write is then refused).
	recorded, at := false, uint64(0)
	res, err := j.ws.writeFile(ctx, in, func(target string, perm fs.FileMode, exists bool) error {
		rec := j.ws.replaced(target, perm, exists)
		rec.CallID = info.ToolCallID
		rec.NewHash = hashOf([]byte(in.Content))
		if err := j.append(ctx, session, journalEvent{Write: rec}); err != nil {
			return err // not recorded: not written
		}
		recorded, at = true, j.next[session]-1
		return nil
	})
	if err == nil && recorded && !res.Success {
		// Refused or failed after the record (a link retargeted
		// meanwhile, a full disk): nothing was written, so the record
		// goes, as an undo of it that restores nothing. Kept, it would
		// list a write that never happened and make a later Undo find
		// its file "changed since".
		if err := j.append(ctx, session, journalEvent{UndoFrom: at, UndoTo: at + 1}); err != nil {
			return WriteFileResult{}, fmt.Errorf("journal: the write of %q was not done, and its record could not be dropped: %w", in.Path, err)
		}
	}
	return res, err
}

// replaced returns what a write to target (resolved, see writeTarget)
// replaces.
func (w *Workspace) replaced(target string, perm fs.FileMode, exists bool) *writeRecord {
	rec := &writeRecord{Path: target, Existed: exists, Perm: perm}
	if !exists {
		return rec
	}
	// Opened and checked on the descriptor, so that a FIFO or a bigger
	// file put there after writeTarget looked is neither waited on nor
	// read whole.
	f, _, rf := w.openRegular(target)
	if rf != nil {
		rec.NotKept = true
		return rec
	}
	defer f.Close()
	prev, truncated, err := readCapped(f, 0, w.opts.MaxWriteBytes)
	if err != nil || truncated {
		rec.NotKept = true
		return rec
	}
	rec.Prev = prev
	return rec
}

// openRegular opens name in the root for reading without blocking (a
// FIFO or a device is not waited on) and returns it when it is a regular
// file, checked on the opened descriptor, with its size.
func (w *Workspace) openRegular(name string) (*os.File, int64, *refusal) {
	f, err := w.root.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, 0, w.classifyOpen(name, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, checkRegular(fi)
	}
	if err != nil {
		f.Close()
		return nil, 0, classify(err)
	}
	return f, fi.Size(), nil
}

func (j *Journal) key(session string) string { return JournalKey(j.name, session) }

// keyOf returns the name the journal of session is read and grows
// under: its key, or the name of an earlier version it was not moved
// from (see moveFrom). j.mu held.
func (j *Journal) keyOf(session string) string {
	if old, ok := j.kept[session]; ok {
		return old
	}
	return j.key(session)
}

// moveOld moves the journal of session an earlier version stored to its
// key, when the key holds nothing yet: from the previous version's key
// ("%undo/<name>/<session>"), or else from session+JournalStoreSuffix,
// the first of them whose events all decode strictly as journal events
// (anything else there, a tool loop's session of that id, is not the
// journal's and is left alone). The events keep their indexes and are
// written in one atomic batch; the old name's are then deleted, so that
// no other journal name takes them too. A journal whose key would pass
// durability.MaxNameLen is not moved, for no write makes such a key
// (see append): it is read where it is, and grows there (keyOf). When
// the key holds the journal already, a copy left under an old name (the process stopped between
// the move and the delete) is deleted: see dropStaleCopy. j.mu held.
func (j *Journal) moveOld(ctx context.Context, session string) error {
	empty := true
	err := j.store.GetEvents(ctx, j.key(session), 0, 1, func(uint64, []byte) error {
		empty = false
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal of session %q: %w", tools.ClipID(session), err)
	}
	olds := []string{journalKeyPrefixV1 + journalKeyRest(j.name, session), session + JournalStoreSuffix}
	if !empty {
		for _, old := range olds {
			j.dropStaleCopy(ctx, session, old)
		}
		return nil
	}
	for _, old := range olds {
		if moved, err := j.moveFrom(ctx, session, old); moved || err != nil {
			return err
		}
	}
	return nil
}

// moveFrom moves the journal of session from the name old to its key,
// when every event there decodes strictly as a journal event, and says
// whether it found one there. A key that would pass
// durability.MaxNameLen (keyFits) is not made: some stores would take
// it and others not, and the journal could then move to none of
// those; the journal is kept under old instead (keyOf). j.mu held.
func (j *Journal) moveFrom(ctx context.Context, session, old string) (bool, error) {
	first, events, err := j.readOld(ctx, session, old)
	if err != nil {
		return false, err
	}
	if first != 0 || len(events) == 0 {
		return false, nil
	}
	if j.keyFits(session) != nil {
		j.kept[session] = old
		return true, nil
	}
	if err := j.store.PersistEvents(ctx, j.key(session), 0, events); err != nil {
		return false, fmt.Errorf("journal of session %q: move the journal of an earlier version (%q): %w", tools.ClipID(session), tools.ClipID(old), err)
	}
	if err := j.store.DeleteEvents(ctx, old, uint64(len(events)-1)); err != nil {
		return true, fmt.Errorf("journal of session %q: moved from %q, which could not be deleted: %w", tools.ClipID(session), tools.ClipID(old), err)
	}
	return true, nil
}

// readOld returns the events stored under the name old, from the index
// of the first, when they follow each other and every one decodes
// strictly as a journal event; none otherwise. j.mu held.
func (j *Journal) readOld(ctx context.Context, session, old string) (first uint64, events [][]byte, err error) {
	journal := true
	err = j.store.GetEvents(ctx, old, 0, 0, func(i uint64, data []byte) error {
		if len(events) == 0 {
			first = i
		}
		if i != first+uint64(len(events)) || !oldJournalEvent(data) {
			journal = false
			return errStopOld
		}
		events = append(events, data)
		return nil
	})
	if err != nil && !errors.Is(err, errStopOld) {
		return 0, nil, fmt.Errorf("journal of session %q: read the journal of an earlier version (%q): %w", tools.ClipID(session), tools.ClipID(old), err)
	}
	if !journal {
		return 0, nil, nil
	}
	return first, events, nil
}

// dropStaleCopy deletes what the name old holds when it is a copy of
// the journal session's key holds: journal events, each the very bytes
// of the key's event at the same index (a move whose delete did not
// happen; the journal may have grown since). Anything else is left
// alone. A failure is logged: the journal itself is not at stake. j.mu
// held.
func (j *Journal) dropStaleCopy(ctx context.Context, session, old string) {
	first, events, err := j.readOld(ctx, session, old)
	if err == nil && len(events) > 0 {
		last := first + uint64(len(events)) - 1
		same := 0
		err = j.store.GetEvents(ctx, j.key(session), first, last+1, func(i uint64, data []byte) error {
			if i == first+uint64(same) && bytes.Equal(data, events[same]) {
				same++
			}
			return nil
		})
		if err == nil && same == len(events) {
			err = j.store.DeleteEvents(ctx, old, last)
		}
	}
	if err != nil {
		j.ws.log.Warn("workspace: journal: delete the copy an earlier version left", "session", session, "name", old, "err", err)
	}
}

var errStopOld = errors.New("not a journal")

// oldJournalEvent reports whether data decodes strictly as a
// journalEvent: a JSON object of its fields alone, a write with a call
// id, a path and a hash, or an undo of a range.
func oldJournalEvent(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var e journalEvent
	if dec.Decode(&e) != nil || dec.More() {
		return false
	}
	if w := e.Write; w != nil {
		return e.UndoFrom == 0 && e.UndoTo == 0 && w.CallID != "" && w.Path != "" && len(w.NewHash) == sha256.Size*2
	}
	return e.UndoTo > e.UndoFrom
}

// append persists e as the session's next event (j.mu held). The
// first event of a session whose key is longer than
// durability.MaxNameLen is refused (keyFits): some stores would take
// the key and others not, and the journal could move to none of those.
// A journal held under such a key already (see load) grows there, and
// so does one an earlier version stored under a name it is not moved
// from (keyOf).
func (j *Journal) append(ctx context.Context, session string, e journalEvent) error {
	next, ok := j.next[session]
	if !ok {
		_, n, err := j.load(ctx, session)
		if err != nil {
			return err
		}
		next = n
	}
	if next == 0 {
		if err := j.keyFits(session); err != nil {
			return err
		}
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal of session %q: %w", tools.ClipID(session), err)
	}
	if err := j.store.PersistEvent(ctx, j.keyOf(session), next, data); err != nil {
		return fmt.Errorf("journal of session %q: %w", tools.ClipID(session), err)
	}
	j.next[session] = next + 1
	return nil
}

type indexedWrite struct {
	index uint64
	rec   *writeRecord
}

// load returns the session's writes not undone, in order, and the index
// of its next event.
//
// A key longer than durability.MaxNameLen is read as any other: some
// stores hold journals under such keys (boltstore takes them, and an
// earlier version wrote them), and what they hold is undone as the rest.
// A store that refuses the key is answered with keyFits' error, which
// says the lengths; only a write that would make such a key is refused
// up front (see append).
func (j *Journal) load(ctx context.Context, session string) ([]indexedWrite, uint64, error) {
	writes, next, err := j.loadKey(ctx, session)
	if errors.Is(err, durability.ErrInvalidName) {
		if kerr := j.keyFits(session); kerr != nil {
			return nil, 0, kerr
		}
	}
	return writes, next, err
}

// loadKey is load, with no word on the key's length.
func (j *Journal) loadKey(ctx context.Context, session string) ([]indexedWrite, uint64, error) {
	var writes []indexedWrite
	var next uint64
	if _, known := j.next[session]; !known {
		if err := j.moveOld(ctx, session); err != nil {
			return nil, 0, err
		}
	}
	key := j.keyOf(session)
	err := j.store.GetEvents(ctx, key, 0, 0, func(i uint64, data []byte) error {
		var e journalEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return &durability.StoreError{Op: durability.OpDecode, Name: key, Err: err}
		}
		next = i + 1
		if e.Write != nil {
			writes = append(writes, indexedWrite{index: i, rec: e.Write})
			return nil
		}
		keep := writes[:0]
		for _, w := range writes {
			if w.index < e.UndoFrom || w.index >= e.UndoTo {
				keep = append(keep, w)
			}
		}
		writes = keep
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("journal of session %q: %w", tools.ClipID(session), err)
	}
	return writes, next, nil
}

// Change is a write of a session that can be undone.
type Change struct {
	CallID  string
	Path    string
	Created bool // there was no file before
}

// Changes lists the session's writes that are not undone, in order.
func (j *Journal) Changes(ctx context.Context, session string) ([]Change, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	writes, _, err := j.load(ctx, session)
	if err != nil {
		return nil, err
	}
	out := make([]Change, len(writes))
	for i, w := range writes {
		out[i] = Change{CallID: w.rec.CallID, Path: w.rec.Path, Created: !w.rec.Existed}
	}
	return out, nil
}

// Restored is a file an undo put back.
type Restored struct {
	Path string `json:"path"`
	// CallID is the write whose effect was undone.
	CallID string `json:"call_id"`
	// Removed: the write had created the file, so undo removed it.
	Removed bool `json:"removed,omitempty"`
}

// Undo restores the files the session wrote to their state before call
// fromCall (its first write), undoing that write and every later one of
// the session, newest first; an empty fromCall undoes every write of the
// session not undone yet. Before changing anything it checks that each
// file still holds what the session wrote (content hash): if one was
// changed since by something else, it restores nothing and returns an
// error wrapping [ErrChangedSince] naming the file; nor does it while a
// command runs when a file to restore is a path hidden from commands
// (see [Options.HidePaths]; the call is refused as write_file's is,
// ReasonHiddenInUse). A write that had
// created a file is undone by removing it (directories it created stay).
// The undone writes are recorded as such, so an undo is not repeated
// after a restart; an undo interrupted by a crash can be run again.
func (j *Journal) Undo(ctx context.Context, session, fromCall string) ([]Restored, error) {
	if err := j.ws.enter(ctx, UndoToolName); err != nil {
		return nil, err
	}
	defer j.ws.calls.Done()
	j.mu.Lock()
	defer j.mu.Unlock()
	writes, next, err := j.load(ctx, session)
	if err != nil {
		return nil, err
	}
	j.next[session] = next
	from := 0
	if fromCall != "" {
		from = -1
		for i, w := range writes {
			if w.rec.CallID == fromCall {
				from = i
				break
			}
		}
		if from < 0 {
			return nil, fmt.Errorf("%w: %q in session %q", ErrNoSuchCall, tools.ClipID(fromCall), tools.ClipID(session))
		}
	}
	undo := writes[from:]
	if len(undo) == 0 {
		return nil, nil
	}
	// Check everything first, on the files' current hashes.
	state := map[string]string{}
	var apply []*writeRecord
	for i := len(undo) - 1; i >= 0; i-- {
		r := undo[i].rec
		cur, ok := state[r.Path]
		if !ok {
			var changed string
			if cur, changed, err = j.ws.currentHash(r.Path); err != nil {
				return nil, fmt.Errorf("workspace: undo: read %s: %w", r.Path, err)
			}
			if changed != "" {
				return nil, fmt.Errorf("%w: %s (written by call %s): now %s", ErrChangedSince, r.Path, r.CallID, changed)
			}
		}
		switch {
		case cur == r.NewHash && r.NotKept:
			return nil, fmt.Errorf("%w: %s (call %s)", ErrNotKept, r.Path, r.CallID)
		case cur == r.NewHash:
			apply = append(apply, r)
			state[r.Path] = r.prevHash()
		case cur == r.prevHash(): // the write failed, or an interrupted undo restored it
			state[r.Path] = cur
		default:
			return nil, fmt.Errorf("%w: %s (written by call %s)", ErrChangedSince, r.Path, r.CallID)
		}
	}
	// A path hidden from commands is not restored while one runs
	// (hiddenWrite): the undo is refused before it restores anything,
	// rather than midway.
	// So is one whose name restore would refuse.
	for _, r := range apply {
		name, rf := j.ws.restoreName(r.Path)
		if rf == nil {
			rf = j.ws.hiddenInUse(name)
		}
		if rf != nil {
			return nil, fmt.Errorf("workspace: undo: restore %s: %w", r.Path, undoRefused(j.ws.explain(r.Path, rf), r.Path))
		}
	}
	var restored []Restored
	for _, r := range apply {
		if err := j.ws.restore(r); err != nil {
			return restored, fmt.Errorf("workspace: undo: restore %s: %w", r.Path, err)
		}
		restored = append(restored, Restored{Path: r.Path, CallID: r.CallID, Removed: !r.Existed})
	}
	if err := j.append(ctx, session, journalEvent{UndoFrom: undo[0].index, UndoTo: next}); err != nil {
		return restored, err
	}
	return restored, nil
}

// currentHash is the hash of the file's content, "" when there is none.
// Only a regular file of at most MaxWriteBytes can hold what a write of
// the session wrote or replaced, so for anything else it returns why the
// file cannot be either (changed), without waiting on it or reading it
// whole: a FIFO is opened without blocking, and the content is hashed as
// it is read, up to that size.
func (w *Workspace) currentHash(path string) (hash, changed string, err error) {
	f, _, rf := w.openRegular(path)
	switch {
	case rf != nil && rf.reason == ReasonNotFound:
		return "", "", nil
	case rf != nil && replacedSince(rf.reason):
		if rf.detail != "" {
			return "", fmt.Sprintf("%s (%s)", rf.reason, rf.detail), nil
		}
		return "", string(rf.reason), nil
	case rf != nil:
		return "", "", undoRefused(rf, path)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, w.opts.MaxWriteBytes+1))
	if err != nil {
		return "", "", err
	}
	if n > w.opts.MaxWriteBytes {
		return "", fmt.Sprintf("holding more than %d bytes, more than one write may", w.opts.MaxWriteBytes), nil
	}
	return hex.EncodeToString(h.Sum(nil)), "", nil
}

// replacedSince reports whether a refusal to open a file the session
// wrote as a regular file in the root says that something else is there
// now: a directory, a FIFO, a symbolic link (out of the root, dangling,
// looping, or on the way to a hidden path), a parent replaced by a file,
// a hard link made to it. The undo is refused as for any other change
// ([ErrChangedSince]), not failed as when the workspace could not be
// read (permission, I/O, the root gone).
func replacedSince(r Reason) bool {
	switch r {
	case ReasonNotRegular, ReasonIsDirectory, ReasonEscapes, ReasonDanglingLink, ReasonSymlinkLoop,
		ReasonNotDirectory, ReasonHardLink, ReasonLinkToHidden:
		return true
	}
	return false
}

// restoreName is the name a restore of path acts on, with write_file's
// checks of the name (checkWriteName): a link a command made on the way
// to a path hidden from commands would otherwise take the restored
// content where they see it. A link to a folder on the way is resolved
// as a write's is (throughLinks): the restore is judged by where it
// lands, a path hidden from commands maybe (pub/key.txt is sec/key.txt
// once a command made pub a link to sec), which is not written nor
// removed while a command runs.
func (w *Workspace) restoreName(path string) (string, *refusal) {
	name, rf := w.checkWriteName(path)
	if rf != nil {
		return "", rf
	}
	target, rf := w.throughLinks(name)
	if rf == nil && target != name {
		rf = reservedOnTheWay(target)
	}
	return target, rf
}

// restore puts back what r replaced, at restoreName.
func (w *Workspace) restore(r *writeRecord) error {
	name, rf := w.restoreName(r.Path)
	if rf != nil {
		return undoRefused(w.explain(r.Path, rf), r.Path)
	}
	if w.hookAfterCheck != nil {
		w.hookAfterCheck()
	}
	if !r.Existed {
		// Removed as a write replaces: a path hidden from commands is
		// not removed while one runs (hiddenWrite), which would take
		// the cover its sandbox put there with the file and let the
		// command make one of its own there.
		end, rf := w.hiddenWrite(name)
		if rf != nil {
			return undoRefused(w.explain(r.Path, rf), r.Path)
		}
		if end != nil {
			defer end()
		}
		if err := w.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if rf := w.replace(name, r.Perm, true, string(r.Prev)); rf != nil {
		return undoRefused(rf, r.Path)
	}
	return nil
}

// refusedError is an undo's refusal (or failure) of the workspace's, as
// write_file reports it: its reason says how the undo call is answered
// (see undoFailed).
type refusedError struct {
	reason Reason
	msg    string
}

func (e *refusedError) Error() string { return e.msg }

// undoRefused is the error of an undo refused (or failed) by rf while it
// read or restored path.
func undoRefused(rf *refusal, path string) error {
	return &refusedError{reason: rf.reason, msg: rf.message("undo", path)}
}
