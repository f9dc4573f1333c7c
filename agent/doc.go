// Package agent is the API for hosts that run many agents for a long
// time: an [Agent] is a tool loop (package tools) around a model adapter
// (package models), started in an actors.Runtime, and its conversations
// are plain calls.
//
//	a, err := agent.New(rt, model, &agent.Options{Tools: toolset, SystemPrompt: "..."})
//	ans, err := a.Run(ctx, "session-1", []models.Message{models.UserMessage("...")})
//	fmt.Println(ans.Text)
//
// [Agent.Run] returns the whole conversation as a *models.Answer: the
// final text apart from what the model said along with its calls, each
// tool round with its results, the summed token usage of the Run's
// responses. A Run that resumes a durable session (see below) answers
// with the rounds done before it too, rebuilt from the store, each once,
// their failed calls included (see [Agent.Run]). [Agent.Stream]
// gives the same as a sequence of [Event] values (text deltas, calls,
// results, usage, restarts) for hosts that show progress.
//
// # Failures, resume and cancellation
//
// A stage that crashes is restarted by its supervisor and the attempt
// ends with ERROR; so does a model that fails. Run then makes another
// attempt, up to [Options].MaxAttempts: with a durability Store it resumes
// the session from the store (completed tool calls are never run again;
// a session can also be resumed by a later process), without one it sends
// the conversation again with every round whose calls ran. A
// conversation on a loop of its own (with a Store, or delegated to, see
// below) whose attempt that loop closed or refused as stopped (stopped for
// good, or stopping: its children still finishing) makes the next one on
// a fresh loop, started once the old one has stopped: it waits for that,
// as long as its ctx lets it and the agent is not closed (it then fails
// with [ErrClosed]), rather than spend its attempts on a loop that
// refuses each at once. A Run that returns while its own loop still
// stops (its ctx ended during that wait, or CancelGrace passed while its
// loop was being stopped) leaves that loop to its session: the
// session's next Run, Stream or Resume waits in the same way, before it
// reads the session or sends anything, so that a fresh loop never runs
// beside the old one; [Agent.Close] waits for it too before it gives the
// agent's name on its Store back (see [ErrNameTaken]). Likewise an attempt after one that failed
// without a failure kind (a crash) waits while the loop restarts (as
// long as its ctx lets it and the agent is not closed), and an
// attempt that a restarting loop refused, or closed before serving it,
// without having failed itself (a supervisor's all-for-one restart for
// another actor's failure) is not counted; an attempt during which the
// loop failed is, so a loop that fails on every request fails the Run
// after MaxAttempts. Those attempts not counted are bounded too, by
// [Options].MaxUncountedAttempts (a supervisor bounds restarts per
// window of time only, so a sibling that keeps failing could otherwise
// keep a Run going): past it the Run fails with a *[FailedError] whose
// Err is [ErrLoopRestarting]. When the
// attempts are used up it returns a *[FailedError]. Cancelling ctx sends
// ABORT: the running tool calls are cancelled and answered, and Run
// returns ctx's error with the answer so far. It waits for that
// [Options].CancelGrace at most: when the model adapter takes longer to
// answer the ABORT (a tool never holds it up: its call is answered as
// cancelled at once, whenever its handler returns), the agent reads the
// rest of the cancelled conversation in the background, and the next Run
// of the session waits until the loop has ended it (or its own ctx
// ends), so that it never mixes with the old one. That wait has no bound
// of its own: an adapter that answers the ABORT at once, as the models
// contract says, leaves nothing to wait for, and one that never does
// holds the session until [Agent.Close] (see [Agent.Run]). With a Store the cancelled
// session stays resumable: a later Run with the same session id and
// messages gives the cancelled calls the results the cancelled Run got
// (none of them runs again), sends the follow-up to the model and
// carries on to a final answer. To start over instead, run with a new
// session id, or remove the cancelled one from the Store with
// [tools.DeleteSession] of its [SessionKey] (once no Run uses it) and
// run it again: a Run with the same id and other messages is refused, as
// the session was started with a different request.
//
// An agent keeps its sessions in the Store under its [Options].Name
// (see [SessionKey]): agents sharing a Store never see each other's
// sessions, and an agent started again under the same name (in a new
// process, say) resumes its own. [New] refuses a second open agent of
// one name on one Store value ([ErrNameTaken]). Versions before
// [SessionKey] kept a session under its bare id: a Run or Resume that
// would continue such a session (the store holds nothing under its key,
// and under the bare id a session started with the same messages) fails
// with [ErrLegacySession] instead of starting the conversation afresh,
// and [Agent.MigrateSessions] of the agent that owns those sessions moves
// them, with their calls held for approval, to its keys. The move is
// crash-safe: after a crash the session is found whole under one key,
// and MigrateSessions called again completes it.
//
// # Approval
//
// With [Options].Approval, calls the policy asks about are held until a
// person answers: Run returns a *[WaitingError] and [Agent.Resume] gives
// the decisions. With a Store the held calls are in the store and the
// session's loop is stopped: nothing stays in memory, and the answer may
// come from another process (its telemetry ends the waiting run marked
// awaiting approval, not failed). Without a Store the session waits in
// the agent's loop until Resume: [Agent.Waiting] lists such sessions, and
// [Agent.Discard] gives one up (its held calls answered as cancelled), so
// that a host whose people may never answer does not keep them for the
// agent's life; [Agent.Close] drops those left.
//
// # Many agents
//
// Agents are cheap: any number of them, with default options, can share a
// runtime (stage names are made unique per start), and one agent serves
// any number of sessions concurrently (one conversation per session at a
// time: [ErrSessionBusy]). Building one starts no actor: its tool loop is
// started by the first conversation that needs it (concurrent first Runs
// start one; a failed start is tried again by the next), so an agent used
// only as another's tool keeps no idle loop, and [Agent.Close] stops the
// loop only if it was started. A started loop that stops for good (its
// supervisor gives up restarting it) is not started again: the Run under
// way fails, and every later Run, Stream or Resume of the agent fails with
// an error wrapping actors.ErrDuplexStopped that names the agent and the
// session, at once, also while the loop is still stopping (it refuses the
// conversation as stopped, and no further attempt is made); make a new
// agent. A runtime
// embedded in a host's actor tree (actors.RuntimeOptions.Parent) puts
// every agent under the host's supervision.
//
// # Agents as tools
//
// [AsTool] gives an agent to other agents as a tool taking {"task": ...}:
// a lead agent delegates to specialists, each delegation a conversation
// of its own on a loop started as a child of the lead's calling tool
// actor (actors.ParentFrom), so the lead's supervision covers it and
// stopping the lead stops it (the lead's [Agent.Close] waits for the
// delegation to return, CancelGrace at most, [HookGrace] once all that
// is left of it is its ToolOptions.OnEvent hook); the specialist's own loop
// is never started for it. A specialist that fails, times out or is cancelled makes an
// error result of that one call, and the lead goes on; so does one whose
// specialist is closed ([Agent.Close] cancels the delegations to it
// rather than wait for the lead). A delegation's
// session id is the specialist's own, apart from those a host gives its
// Runs; with a Store the session is kept there while the delegation runs
// and deleted once it is over (see AsTool).
// The delegation tool's flags come from the specialist's tools
// ([Agent.ToolFlags]): read-only only when all of them are, irreversible
// when any is, so approval policies and MCP clients see what a delegation
// may do; ToolOptions.Flags overrides them.
//
// # Concurrency
//
// An Agent is safe for concurrent use. Options are copied by New; the
// hooks they hold run on actor goroutines and must not block. A host may
// close an agent from a Stream's loop body: Close cancels that Run rather
// than wait for it; and from a tool of its own, given the call's ctx:
// Close then returns at once and finishes once that Run has returned.
// Given another ctx (context.Background, say), Close stops waiting once
// the Runs left have waited CancelGrace for handlers running since
// before it began, and from a delegation's OnEvent hook (which gets no
// ctx) once it has waited [HookGrace] for the hook to return (a hook on
// another goroutine that returns sooner is no caller, and Close waits
// on): it then returns an error wrapping [ErrCloseContinues],
// the agent finishing its close in the background once those handlers
// have returned (see [Agent.Close]; [Agent.Done] tells when it has).
package agent
