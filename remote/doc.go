// Package remote runs tools in other processes over protoactor remote
// (gRPC): a tool node ([Serve], and the polyweave-node command) hosts tools
// as supervised duplexes; a host's [Client] fetches their definitions with
// DESCRIBE over the wire and returns them as ordinary *tools.Tool values,
// which routers, loops and agents use exactly like local ones.
//
// # Wire
//
// Only *messages.Frame crosses the wire (plus protoactor's own system
// messages). The client sends DESCRIBE (answered with one DESCRIPTION per
// tool, then END), TOOL_CALL (answered with its one TOOL_RESULT) and
// CANCEL, to the node's service actor [ServiceName], as itself, so that
// answers come back to it. Each call gets a stream id unique to the client.
//
// # Guarantees
//
// The host's tool duplex is the one that answers the model, so every
// guarantee of package tools holds for remote tools: exactly one result
// per call, arguments validated (against the node's schema) before the
// call leaves the host, a timeout (the node's own, or
// [ClientOptions].CallTimeout) that cancels the call on the node too, and
// CANCEL/ABORT forwarded. The client watches every node it calls: when a
// node dies (killed, disconnected) or cannot be reached, its calls in
// flight are answered at once with [ErrNodeUnreachable], and it is
// reported once ([ClientOptions].OnNodeGone). The next call reconnects; a
// node that cannot be reached is dialled again only after a backoff
// ([ClientOptions].RedialBackoff, doubling with each failure), calls in
// the meantime being answered at once with ErrNodeUnreachable, so a node
// that comes back serves again once its backoff has passed. A node that accepts
// the connection but does not complete the handshake within
// [ClientOptions].ConnectTimeout cannot be reached either; a node that
// stops answering without closing its connection (a network cut, a
// frozen process) is gone once a ping over the quiet connection goes
// unanswered ([ClientOptions].KeepaliveTime and KeepaliveTimeout). A Close
// whose ctx ends first names the peers it was still connecting to. The other way round,
// a node watches each caller: when a caller's process dies, or the
// node's connection to it (which carries the answers) drops, or a ping
// over a quiet connection goes unanswered ([NodeOptions].KeepaliveTime
// and KeepaliveTimeout, with the client's defaults), the node cancels
// that caller's calls (their handlers' contexts end) and forgets them; a
// caller still there (only the node's connection to it lost) is told,
// each of its calls answered with [ErrConnectionLost] (over a new
// connection) rather than waiting for its timeout. A call whose result
// the node had sent into that connection as it ended is answered so by
// the client (which sees the connection end too), and a DESCRIBE whose
// answer was lost so fails with ErrConnectionLost. When the caller's
// connection to the node (which carries its calls) ends, the caller has
// answered the calls it carried with ErrNodeUnreachable, and the node
// cancels each of them (but not the calls that came over a newer
// connection). [Client.Close] cancels its calls still
// running on nodes and answers every request still waiting with
// [ErrClosed]. A node's result that
// is an error arrives as the handler's error, so the model reads the
// node's message.
//
// # Sizes
//
// One frame (a call with its arguments, a result) is at most
// MaxFrameBytes ([ClientOptions] and [NodeOptions]; default
// [DefaultMaxFrameBytes], at least [MinFrameBytes]), checked by its
// sender: a call over the
// client's limit is answered at once with an error of kind
// [KindTooLarge] (wrapping [ErrTooLarge]) and not sent; a node answers
// so a call over its own limit, without running it, and replaces a
// result over its limit by such an error, so the call still gets its one
// result at once. Every answer repeats its request's ids: a node does
// not serve a request whose stream id or tool call id is over 1 KiB (a
// client's are far shorter), and answers it with one error of kind
// KindTooLarge whose ids are clipped, so that its answers stay small.
// The connections carry batches of frames (protoactor
// sends what it has queued for a peer as one gRPC message): every node
// and client takes gRPC messages of up to 64 MiB, and bounds its
// batches so that a full batch of the largest frames fits, so a burst of
// calls never ends a connection (which would be taken for the peer
// gone). [MessageLimits] gives a protoactor remote started elsewhere (a
// cluster member's) the same bounds.
// gRPC would set aside the length a message claims as soon as its 5-byte
// prefix arrives; nodes and clients hold a message's frames back until
// the whole message has arrived, so what a peer makes them hold is what
// it sent, and at most one message of the limit (with its framing) per
// connection: a connection that sends more of messages not yet whole is
// closed, its peer told why ([ErrConnBudget], in an HTTP/2 GOAWAY), and
// so is one whose message is not whole within HeldMessageTimeout of its
// first bytes ([NodeOptions], [ClientOptions]; default
// [DefaultHeldMessageTimeout]; [ErrHeldTooLong]), so that a peer
// trickling a message holds nothing for ever. A client whose node closes
// its connection so answers the calls it carried with
// ErrNodeUnreachable, naming the node's reason. One
// peer (an IP address) has at most MaxConnsPerPeer connections open to a
// node or client at once ([NodeOptions], [ClientOptions]; default
// [DefaultMaxConnsPerPeer]); one more is refused so ([ErrTooManyConns]).
// A caller has at most [NodeOptions].MaxCallsPerCaller calls in flight
// on a node (default [DefaultMaxCallsPerCaller]): one more is answered at
// once, not run, with an error of kind unavailable
// (tools.FailureUnavailable) naming the limit; and a caller that reads
// its answers slowly, with that many waiting to go out to it, has its
// connection left unread until they have gone, so that its requests wait
// on its side rather than in the node's queue. Without TLS there is no
// authentication, so anyone who reaches a node or client can use these
// bounds to the full: one more reason they listen on loopback addresses
// unless AllowRemote. With TLS, only peers with a certificate from its
// CAs get past the handshake.
//
// # Pings
//
// Nodes and clients ping their quiet connections (every
// DefaultKeepaliveTime unless their options say otherwise) and let their
// peers ping them every 5 s, even with no call running; [DialOptions] and
// [PingPolicy] give a protoactor remote started elsewhere (a cluster
// member's) the same. A gRPC server hangs up on a peer that pings more
// often than its policy allows: nodes and clients built before they
// pinged allow one ping per 5 minutes, so a peer that pings them loses
// its connection to them after a few pings. Where such peers still run,
// turn the pings of the new ones off (a negative KeepaliveTime).
//
// # Mutual TLS
//
// Set [NodeOptions].TLS and [ClientOptions].TLS (a [TLS]: a certificate
// with its key, and the CAs peers' certificates must chain to; [LoadTLS]
// reads them from PEM files) and nodes and clients authenticate each
// other and encrypt. Protoactor's remote connects both ways: a client
// dials the node to send its calls, and the node dials the client (at
// the client's Address) to send the answers. So each side serves gRPC
// requiring a client certificate, and dials presenting its own and
// checking the peer's; the pings (keepalive), the guard and the message
// limits work as without TLS. Setting it up:
//
//   - make a CA (or use your own PKI) and have it issue one certificate
//     per node and per client, each naming (as an IP or DNS subject
//     alternative name) the host of the Address its owner listens on,
//     which is the one its peers dial, and valid for both server and
//     client authentication (extended key usages serverAuth and
//     clientAuth);
//   - give every node and client its certificate and key and the CA
//     certificate, in NodeOptions.TLS and ClientOptions.TLS (the
//     polyweave-node command: -tls-cert, -tls-key, -tls-ca);
//   - nodes and clients on other machines still need AllowRemote.
//
// A peer without a certificate, or with one from another CA, is refused
// at the handshake, before the node reads anything: it runs no tool. A
// client that cannot reach a node so (the node refuses its certificate,
// it does not trust the node's, or one side has no TLS) answers the call
// at once with [ErrNodeUnreachable], the error naming the TLS failure.
// Every peer with a certificate from the CAs is trusted alike (it may run
// every tool of a node, or answer a client's calls): have the CAs issue
// certificates to one deployment's nodes and clients only. Certificates
// and CAs are taken once, at start (a pool changed later changes nothing
// of a running peer): renew them by restarting. Dials speak TLS 1.2 (see
// [TLS]), whose handshake sends certificates unencrypted: what the
// connections carry is encrypted, but an observer of the network learns
// each peer's certificate (its names). A peer's new connection gets
// [HandshakeTimeout] to get through its handshake. A client whose
// certificate does not name the host of its own Address gets no answers:
// its nodes check that name when they connect back to it.
// [TLS.GRPCOptions] gives a protoactor remote started elsewhere (package
// cluster's members) the same.
//
// # Loopback only, unless asked
//
// Without TLS, neither nodes nor clients authenticate their peers or
// encrypt: whoever reaches a node runs its tools, and whoever reaches a
// client can answer its calls. With TLS or without, both listen on
// loopback only unless told otherwise ([NodeOptions].AllowRemote,
// [ClientOptions].AllowRemote), and refuse any other address with
// [ErrNotLoopback].
//
// # Unknown types on the wire
//
// The pinned protoactor decodes whatever type name a peer sends and
// crashes the receiving process on one this binary has not registered.
// Nodes and clients install a gRPC interceptor that drops such messages
// (and malformed envelopes) before protoactor sees them, counts them
// ([Node.Dropped], [Client.Dropped]) and logs them (the first, then each
// time the count doubles, with the total). The pinned service's
// unary methods (ListProcesses, GetProcessDiagnostics) panic, which gRPC
// does not recover: nodes and clients refuse every unary call with
// codes.Unimplemented before its handler runs (and log the refusals as
// the drops). Every envelope that
// arrives is delivered to the receiving process's own actors, whatever
// address its target names (localhost for 127.0.0.1, any address of a
// node listening on every interface): protoactor would send one naming
// another address on to it, to itself over and over, or to another
// host. A client resolves a loopback name it is given (localhost) to the
// loopback IP, the address a node listening there knows itself by. A
// node listening on every interface, or reached through NAT, can name
// itself by the address its callers reach it at ([NodeOptions.Advertise]).
// [Guard] gives a
// protoactor remote started elsewhere (a cluster member's) the same, once
// told the remote's address ([Guard.SetAddress]).
package remote
