package workspace

import (
	"bytes"
	"encoding/json"
	"sync"
)

// ReadFileInput is the argument of read_file. Its JSON schema can be
// inferred with github.com/google/jsonschema-go. The zero value (an empty
// path) lists the workspace root. Inputs and results are plain values.
type ReadFileInput struct {
	Path string `json:"path" jsonschema:"file path relative to the workspace root; empty lists the files at the root, a directory path lists that directory"`
}

// WriteFileInput is the argument of write_file. The zero value is
// refused (empty path).
type WriteFileInput struct {
	Path    string `json:"path" jsonschema:"file path relative to the workspace root; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

// RunCommandInput is the argument of run_command. The zero value is
// refused (empty command).
type RunCommandInput struct {
	Command string `json:"command" jsonschema:"shell command line, run with sh -c in the workspace directory"`
}

// Reason says why a tool call failed. It is carried in results for Go
// callers (tests, metrics, tool bindings) and is not part of the JSON the
// model reads, which gets the human-readable Error instead.
type Reason string

// Reasons a tool call can fail. Path reasons come from read_file and
// write_file, the command reasons from run_command.
const (
	ReasonEmptyPath      Reason = "empty path"
	ReasonAbsolute       Reason = "absolute paths are not allowed; use a path relative to the workspace root"
	ReasonEscapes        Reason = "path escapes the workspace root"
	ReasonNUL            Reason = "path contains a NUL byte"
	ReasonBackslash      Reason = "path contains a backslash; use / as the separator"
	ReasonPercentEncoded Reason = "path contains percent-encoding, which is not decoded; use the plain name"
	ReasonNameTooLong    Reason = "name too long"
	ReasonExtension      Reason = "file extension not allowed"
	ReasonNotFound       Reason = "no such file or directory"
	ReasonDanglingLink   Reason = "symbolic link whose target does not exist"
	ReasonSymlinkLoop    Reason = "too many levels of symbolic links"
	ReasonNotDirectory   Reason = "a parent of the path is not a directory"
	ReasonIsDirectory    Reason = "is a directory"
	ReasonNotRegular     Reason = "not a regular file"
	ReasonHardLink       Reason = "file has more than one hard link"
	ReasonLinkToHidden   Reason = "a symbolic link is on the way to a path hidden from commands"
	ReasonPermission     Reason = "permission denied"
	ReasonIO             Reason = "file system error"
	ReasonTrailingSlash  Reason = "path ends with /, which names a directory; give the file's name without it"
	ReasonTooLarge       Reason = "content too large"
	ReasonRetargeted     Reason = "a symbolic link on the path was changed while it was written"
	ReasonHiddenInUse    Reason = "the path is hidden from commands and a command is running"
	ReasonReserved       Reason = "the name is reserved for the file tools' own temporary files"
	ReasonWorkspaceGone  Reason = "the workspace directory itself no longer exists; nothing in it can be read or written"
	ReasonEmptyCommand   Reason = "empty command"
	ReasonStartFailed    Reason = "could not start the command"
	ReasonRootLocked     Reason = "the lock that keeps commands and writes of hidden paths apart was held elsewhere"
	ReasonCommandNUL     Reason = "command contains a NUL byte"
	ReasonCommandTooLong Reason = "command too long"
)

// ReadFileResult is the result of read_file. Its JSON has the seed's
// shapes: a listing is {success, path, isDirectory, files, hint}, a file
// is {success, path, content} and a failure is {success:false, error,
// path}; the additions below appear only when set.
//
// The zero value is an unsuccessful result with no message.
type ReadFileResult struct {
	Success bool   `json:"success"`
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`

	IsDirectory bool     `json:"isDirectory,omitempty"`
	Files       []string `json:"files,omitempty"`
	Hint        string   `json:"hint,omitempty"`

	Error string `json:"error,omitempty"`

	// Additions: Bytes is the file's full size; Truncated says Content (or
	// Files) was cut; Binary says the file is not UTF-8 text and Content
	// was left empty.
	Bytes     int64 `json:"bytes,omitempty"`
	Truncated bool  `json:"truncated,omitempty"`
	Binary    bool  `json:"binary,omitempty"`

	// Reason says why the call failed; empty on success.
	Reason Reason `json:"-"`
}

// MarshalJSON writes the seed's shapes: content is present (possibly
// empty) for every successful file read, files for every listing.
func (r ReadFileResult) MarshalJSON() ([]byte, error) {
	switch {
	case r.Success && r.IsDirectory:
		files := r.Files
		if files == nil {
			files = []string{}
		}
		return marshal(struct {
			Success     bool     `json:"success"`
			Path        string   `json:"path"`
			IsDirectory bool     `json:"isDirectory"`
			Files       []string `json:"files"`
			Hint        string   `json:"hint"`
			Truncated   bool     `json:"truncated,omitempty"`
		}{true, r.Path, true, files, r.Hint, r.Truncated}, len(r.Path)+len(r.Hint)+16*len(files))
	case r.Success:
		return marshal(struct {
			Success   bool   `json:"success"`
			Path      string `json:"path"`
			Content   string `json:"content"`
			Bytes     int64  `json:"bytes,omitempty"`
			Truncated bool   `json:"truncated,omitempty"`
			Binary    bool   `json:"binary,omitempty"`
			Hint      string `json:"hint,omitempty"`
		}{true, r.Path, r.Content, r.Bytes, r.Truncated, r.Binary, r.Hint}, len(r.Path)+len(r.Content)+len(r.Hint))
	}
	return marshal(struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Path    string `json:"path"`
	}{false, r.Error, r.Path}, len(r.Path)+len(r.Error))
}

// WriteFileResult is the result of write_file: {success, path, bytes} or,
// on failure, {success:false, error}.
//
// The zero value is an unsuccessful result with no message.
type WriteFileResult struct {
	Success bool   `json:"success"`
	Path    string `json:"path,omitempty"`
	Bytes   int    `json:"bytes,omitempty"`
	Error   string `json:"error,omitempty"`

	// Reason says why the call failed; empty on success.
	Reason Reason `json:"-"`
}

// MarshalJSON writes the seed's shapes: path and bytes (possibly 0) on
// success, only success and error on failure.
func (r WriteFileResult) MarshalJSON() ([]byte, error) {
	if r.Success {
		return marshal(struct {
			Success bool   `json:"success"`
			Path    string `json:"path"`
			Bytes   int    `json:"bytes"`
		}{true, r.Path, r.Bytes}, len(r.Path))
	}
	return marshal(struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}{false, r.Error}, len(r.Error))
}

// Values of [RunCommandResult.StoppedBy].
const (
	StoppedByTimeout       = "timeout"
	StoppedByCancel        = "cancelled"
	StoppedByClose         = "workspace closed"
	StoppedByCPULimit      = "cpu time limit"
	StoppedByFileSizeLimit = "file size limit"
	StoppedByMemoryLimit   = "memory limit"
	StoppedByProcessLimit  = "process limit"
	StoppedBySandbox       = "sandbox failure"
)

// TimeoutExitCode is the exit code reported for a command that ran past
// its timeout and was killed, as coreutils timeout(1) reports it.
const TimeoutExitCode = 124

// RunCommandResult is the result of run_command. Success is true whenever
// the command ran, whatever its exit code; it is false only for an empty
// command or a shell that could not be started. JSON shapes are the
// seed's: {success, command, stdout, exitCode:0} on exit 0,
// {success, command, stdout, stderr, exitCode} otherwise, and
// {success:false, error} when the command did not run. Stderr is also
// included on exit 0 when it is not empty.
//
// A command killed by signal N reports exit code 128+N, as a shell does. A
// command that ran past its timeout reports TimeoutExitCode, TimedOut and
// an Error saying so; one whose sandbox was not ready within the timeout
// never ran: Success false, TimedOut, and ReasonStartFailed, or
// ReasonRootLocked when it waited that long for the lock on the
// workspace's root held exclusive elsewhere (a write of a path hidden
// from commands in a workspace open on the directory, or a program of
// the host). A command
// whose timeout came just as its sandbox started it reports
// TimeoutExitCode too: it may have run briefly (see
// [Workspace.RunCommand]).
//
// The zero value is an unsuccessful result with no message.
type RunCommandResult struct {
	Success  bool   `json:"success"`
	Command  string `json:"command,omitempty"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr,omitempty"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`

	// Additions: which streams were cut at Options.MaxOutputBytes, and
	// whether the command was killed for running past its timeout.
	StdoutTruncated bool `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool `json:"stderrTruncated,omitempty"`
	TimedOut        bool `json:"timedOut,omitempty"`

	// Signal names the signal that killed the shell ("SIGKILL"), when
	// one did; ExitCode is then 128 plus its number.
	Signal string `json:"signal,omitempty"`
	// StoppedBy says what cut the command short, when something did:
	// one of the StoppedBy constants. Error then says it in words.
	StoppedBy string `json:"stoppedBy,omitempty"`
	// Sandboxed says the command ran in the sandbox (see
	// Workspace.Protections for what that included).
	Sandboxed bool `json:"sandboxed,omitempty"`

	// Reason says why the command did not run; empty when it ran.
	Reason Reason `json:"-"`

	// notReady: the command never ran because its sandbox was not set
	// up within the timeout (or the lock it shares with the workspaces
	// open on the directory not taken, see commandBegins), or it or its sandbox could not be started
	// for want of a resource (sandbox.ErrResources, resourceError): it
	// may be tried again, the tool is not broken (see failedResult).
	notReady bool
}

// MarshalJSON writes the seed's shapes described on [RunCommandResult].
func (r RunCommandResult) MarshalJSON() ([]byte, error) {
	if !r.Success {
		return marshal(struct {
			Success bool   `json:"success"`
			Error   string `json:"error"`
		}{false, r.Error}, len(r.Error))
	}
	var stderr *string // omitted on exit 0 with nothing on stderr
	if r.ExitCode != 0 || r.Stderr != "" {
		stderr = &r.Stderr
	}
	return marshal(struct {
		Success         bool    `json:"success"`
		Command         string  `json:"command"`
		Stdout          string  `json:"stdout"`
		Stderr          *string `json:"stderr,omitempty"`
		ExitCode        int     `json:"exitCode"`
		Error           string  `json:"error,omitempty"`
		StdoutTruncated bool    `json:"stdoutTruncated,omitempty"`
		StderrTruncated bool    `json:"stderrTruncated,omitempty"`
		TimedOut        bool    `json:"timedOut,omitempty"`
		Signal          string  `json:"signal,omitempty"`
		StoppedBy       string  `json:"stoppedBy,omitempty"`
		Sandboxed       bool    `json:"sandboxed,omitempty"`
	}{true, r.Command, r.Stdout, stderr, r.ExitCode, r.Error, r.StdoutTruncated, r.StderrTruncated, r.TimedOut,
		r.Signal, r.StoppedBy, r.Sandboxed}, len(r.Command)+len(r.Stdout)+len(r.Stderr)+len(r.Error))
}

// marshal encodes v as JSON without escaping <, > and & (as
// json.Marshal does, for HTML): a result is read by a model, which must
// see code and commands as they are. The encoder's trailing newline is
// dropped. size is the length of the result's text fields, which the
// encoding's length mostly is: the encoding is written into a slice of
// that capacity, its one allocation.
func marshal(v any, size int) ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	e.out = make([]byte, 0, size+64) // the text and the other fields
	err := e.enc.Encode(v)
	out := e.out
	e.out = nil
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out, []byte("\n")), nil
}

// encoder is a JSON encoder writing into out, reused by marshal.
type encoder struct {
	out []byte
	enc *json.Encoder
}

func (e *encoder) Write(p []byte) (int, error) {
	e.out = append(e.out, p...)
	return len(p), nil
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(e)
	e.enc.SetEscapeHTML(false)
	return e
}}
