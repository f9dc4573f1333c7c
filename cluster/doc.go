// Package cluster runs agent sessions across the processes of a protoactor
// cluster: each session (its tool loop, persisted step by step as
// tools.SessionOptions describes) is a virtual actor of kind [Kind]
// identified by its session id. Any member can host it and any member (or
// client) reaches it by id with [Member.Run]; when its member dies, the
// next request activates it on another member, which resumes it from the
// shared store.
//
// # Members, placement and membership
//
// [Start] joins this process to a cluster: protoactor remote (gRPC) on
// Options.Address, protoactor cluster with a membership provider
// ([Automanaged] for a static list of hosts, [Etcd] when members come and
// go, or any protoactor provider), and the shared store (durability/pgstore
// on PostgreSQL). An address already in use, or a provider that cannot
// register the member, fails Start with an error; with [Etcd], an etcd
// that does not answer fails it once the provider's timeout
// ([EtcdTimeout]) has passed, with an error wrapping [ErrEtcdUnreachable]. Sessions are placed by rendezvous hashing of their id over
// the members: when the members change, the sessions whose owner changed
// are stopped where they ran and activated on their new owner by their
// next request. A member activates only the sessions that its own view of
// the members gives it; a requester whose view is older is refused and
// asks again.
//
// # Resuming and fencing
//
// An activation claims the session in the store ([pgstore.Store.Claim]):
// the claim's epoch is raised, and every write of an older incarnation
// (one on a member cut off from the others, or paused, or still stopping)
// fails from then on (pgstore.ErrFenced), atomically, so a session is
// written by one incarnation at a time. The loop then resumes from the
// store: tool calls whose results were stored are never run again; calls
// that were running when the member died are answered as interrupted
// (unless their tool is Idempotent); the model continues. Because the
// loop persists each step before it acts on it, an incarnation that has
// been fenced cannot start another call either: it fails at its next
// write, and stops. A loop that fails while its store works (a panic, a
// bug) is restarted by its supervisor, which closes the session's stream
// with an error: the member sends the session's first request again to
// the restarted loop, which resumes the session from the store as a new
// incarnation would (in the same incarnation, up to 10 times; then the
// session has failed). A model that answers an error is not restarted:
// that is a failed session.
//
// # Requests
//
// [Member.Run] sends the session's first request and waits for its end.
// On the wire this is a META frame ("polyweave.session.run") answered by
// another ("polyweave.session.status"): only *messages.Frame crosses it,
// and the guard of package remote drops anything this binary cannot
// decode. A session that cannot answer yet keeps the request for
// Options.Hold and then answers "running"; Run asks again, so a request
// whose member died unanswered is given up after Hold +
// Options.RequestTimeout and sent to wherever the session is then. Run
// returns as soon as its context ends, whatever it is waiting for; the
// session goes on without it. A session that has ended answers with its
// stored answer, from any member.
//
// A session id names the session in the store, and crosses the wire in
// protobuf strings: Run refuses at once an id that is empty, not valid
// UTF-8 or longer than MaxSessionIDLen bytes (durability.ErrInvalidName).
// A store that fails is not a failed session: an incarnation that cannot
// claim its session, or whose loop failed after a call to the store did,
// stops without keeping an answer, and Run asks again, waiting longer
// each time, up to Options.StoreRetries times in a row (then it fails
// with ErrStoreFailing; by default 30 times, 126.3 s of waiting in all,
// enough for an ordinary PostgreSQL failover); the next incarnation
// resumes from the store. A
// store that refuses the session for good fails Run at once: a closed
// store (durability.ErrClosed), or one that refuses the claim or the
// writes with an error that asking again cannot cure (ErrStoreRefused:
// durability.IsPermanent, or PostgreSQL's insufficient_privilege). A
// database that is read-only for now (read_only_sql_transaction, as
// during a failover) is asked again, within the bound.
//
// A process that restarts at the address of an earlier one (under a new
// member id) names its requests' futures as the earlier one did, so it
// may get late answers meant for the earlier one. Every answer names its
// session, and an activation is named after its session: an answer or an
// activation of another session is not taken (Run asks again), and a
// session never runs a request for another.
//
// # Sizes
//
// A run request carries the session's whole first request (its
// conversation, with tool results, may be large), and an answer the
// session's final text. Each is one frame, at most
// Options.MaxFrameBytes (default remote.DefaultMaxFrameBytes) of the
// member that sends it. Run fails at once, with an error wrapping
// remote.ErrTooLarge, for a request over its own member's limit (it is
// not sent). A session whose answer is over the limit of the member that
// hosts it has run (its tools' side effects happened): its answer is
// kept in the store, not sent, and Run fails with an error wrapping
// remote.ErrTooLarge once the session ends. A session that failed is
// not withheld: an error too long to fit the limit is clipped (its
// beginning kept, with its full length), and Run fails with an error
// wrapping ErrSessionFailed as for any failed session. Members bound
// their gRPC messages and batches as
// package remote's nodes and clients do (remote.MessageLimits), so
// frames within the limits, and bursts of them, never end a connection
// (which protoactor would take for the peer gone). As theirs, a member's
// connections hold a message's frames back until the whole message has
// come, for Options.HeldMessageTimeout at most, and one peer has at most
// Options.MaxConnsPerPeer of them open at once.
//
// # Mutual TLS
//
// Without TLS, members and clients have no authentication: whoever
// reaches a member's address can activate sessions on it and answer its
// requests. Give every member and client an Options.TLS (a remote.TLS
// from the same CAs; remote.LoadTLS reads PEM files) and their
// connections are encrypted and both ends authenticated: only peers with
// a certificate that chains to the CAs connect, so a peer without one
// reaches no member, and no session runs for it. Each certificate must
// name the host of its owner's Options.Address (as an IP or DNS subject
// alternative name), which its peers dial, and be valid for both server
// and client authentication (each member serves and dials). TLS covers
// the members' protoactor remote (gRPC), which carries the requests and
// the answers; not the provider's own traffic: [Automanaged]'s health
// checks are plain HTTP (they tell a member's id, address and kinds, and
// run nothing), and the [Etcd] provider connects to etcd without TLS
// (whoever can write to etcd can change the membership: keep etcd on a
// trusted network). Members still listen on loopback only unless
// Options.AllowRemote.
//
// # Limits of the pinned protoactor
//
// The pinned protoactor cluster has data races among its own goroutines
// (its gossip actor reads the member list and the block list that the
// provider's goroutine replaces, without a lock); this package replaces
// its disthash identity lookup, whose member set raced with every request,
// but cannot fix those. A member it has once seen leave is blocked for
// good: a restarted member joins under a new id, as a new member. A
// member that was seen to leave while it was alive (paused, or cut off,
// for longer than its provider's failure detection) is excluded for good
// when it comes back, however healthy: it could host nothing and reach no
// one. So it leaves, as Close makes it leave: its Runs fail with
// [ErrExcluded], it stops its sessions, deregisters and frees its
// address, and then [Member.Excluded] is closed. Its host starts a new
// member in its place (a new Start, which may take the same address),
// which joins under a new id.
//
// # Closing
//
// [Member.Close] ends every Run of the member (in progress or later) with
// an error wrapping [ErrClosed] before it stops the member's sessions;
// each session is taken over by the next request for it, on another
// member.
package cluster
