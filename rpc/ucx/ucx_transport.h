// The UCX transport of the RPC agent, over UCX's ucp API (rpc/transport.h describes the interface).
//
// Design (the code is in rpc/ucx/*.cc; ucx_context.h, ucx_envelope.h, ucx_receiver.h and
// ucx_transport_impl.h are private):
//
// * Threads. One ucp context (features AM and WAKEUP) and two workers in UCS_THREAD_MODE_SINGLE. Every
//   UCX call after start() is made by one progress thread, which start() creates and shutdown() joins;
//   send() encodes the frame prefix on the caller's thread and queues. The thread polls the workers for
//   50 us after its last event (yielding the core between polls), then arms them and sleeps in poll() on
//   their event fds and an eventfd that send() writes when it finds the thread asleep, so it wakes at
//   once for network events and for local sends. handlers.on_message and on_peer_failure run on it.
//
// * Endpoints. Two per peer, made by the first send() to the peer or the first message from it:
//   - a data endpoint on the data worker, error mode NONE, so that UCX may use shared memory on one host
//     (sysv/posix for small messages, cma single-copy for large ones; tcp or RDMA across hosts): UCX
//     1.13's shared-memory transports cannot handle a peer failure, so error mode PEER would force every
//     message onto tcp (raw ucp here: 15 us instead of 1.4 us per 64-byte round trip, 1.3 instead of 3.9
//     GB/s for a 16 MiB echo);
//   - a monitor endpoint on the monitor worker, error mode PEER, which carries nothing: UCX gives it tcp
//     (or another transport that can tell), and its error handler fires within milliseconds when the
//     peer's workers go away (a process that exits or is killed, a transport that shuts down). UCX
//     keepalive (UCX_KEEPALIVE_INTERVAL, 5 s unless set in the environment) covers a host that goes
//     silent. Without a transport that can report a peer failure (no tcp in UCX_TLS) start() logs a
//     warning and failures are not noticed.
//   Two workers, because UCX pairs the endpoints of two workers by the order they were made in and aborts
//   on a pair whose error modes differ; for the same reason endpoints live as long as the peer does and
//   are never re-made one-sidedly for a live peer. The data endpoint has an error handler too: UCX then
//   reports a transfer that failed because a sender died instead of tearing down its own endpoint under the
//   sender's messages still queued (which crashes UCX 1.13). local_address() packs a nonce and both workers'
//   addresses (ucx_context.h). There is no connect retry: an endpoint is made locally from the address, so
//   connect_retries, bind_host / bind_port and io_threads do not apply; limits do. connect_backoff and
//   connect_backoff_max pace reconnects to a peer that failed twice or more with no completed send in between
//   (sends meanwhile fail at once, reported as that peer's failure): a connect per message to a dead peer
//   could abort inside UCX 1.13.
//
// * Messages. One frame (rpc/wire.h) is one active message: the user header is a 32-byte envelope
//   (sender id, stream, sequence number; ucx_envelope.h), the stream token on a stream's first message,
//   and the frame prefix (header + tensor table + meta) when it fits the worker's AM header limit (8 KiB
//   here); the data is the tensors' own storage (one IOV entry per tensor, no copy; the Message lives
//   until UCX completes the send). UCX sends small messages eagerly (the receiver copies them into the
//   tensors decode_body() allocated) and large ones by rendezvous, which ucp_am_recv_data_nbx fetches
//   straight into the tensors' storage. A prefix too large for the header goes in front of the data, at
//   the cost of one copy on the receiver.
//
// * Authentication (docs/WIRE.md "RPC over UCX"). UCX has no accept step of ours: anyone who learns or
//   guesses a worker address can make an endpoint and send active messages. So each transport incarnation
//   draws a 32-byte nonce and publishes it in local_address() (ucx_context.h), which peers read from the
//   job's authenticated store; the first message of every stream carries a stream token, HMAC-SHA256 over
//   the job secret (TransportOptions::secret, else security::job_secret()), both worker ids, both nonces
//   and the stream id (security/stream_token.h). The receiver reads nothing past the envelope of a stream
//   whose token has not verified: no parse, no allocation from claimed sizes, no fetch, no reset, no
//   failure reported against the worker id it claims; it logs the stream once (ucx_receiver.h). The cost
//   is one HMAC per stream on each side (a few microseconds, once), not a round trip per stream.
//   Both ways: every message either side accepts comes from a holder of the secret, because a reply
//   travels on the replier's own stream, opened by its own token bound to the original sender's nonce; a
//   worker without the secret can neither deliver a message nor answer one. What a sender sends before
//   any reply goes only to an address it read from the authenticated store, which reaches that live
//   worker (its tcp port, its shared-memory segment): a stranger cannot hold them while it lives, and the
//   token it would see is bound to the real worker's nonce and reveals no secret. What this leaves open
//   is what MAC authentication without encryption leaves open (docs/SECURITY.md): a listener on the path
//   reads the traffic and the stream ids, and could replay or inject; a stranger that takes over a dead
//   worker's transport address would read what is still sent to that address. A reset is acted on only
//   for the sender's current stream id (64 random bits that only the two ends see).
//
// * Order. UCX runs the AM handler in send order, but a rendezvous completes after an eager message sent
//   behind it; the receiver delivers each (sender, stream) strictly by sequence number, holding early
//   arrivals back (ucx_receiver.h).
//
// * Failures. A monitor or data endpoint error, a failed send or fetch: the endpoints are closed and
//   on_peer_failure runs once; the next send() makes new endpoints (and fails again, reported, while the
//   peer is gone). A malformed frame on an authenticated stream is logged naming the peer and the field,
//   dropped with the rest of its stream, reported, and answered with a reset message: the sender reports
//   the failure too and starts a new stream on the same endpoints. Endpoints this transport closes itself
//   report nothing. Rendezvous sends in flight to a peer that died are not completed by UCX (endpoints
//   without error handling mode); their messages are released at shutdown.
//
// * shutdown() is idempotent and must not be called from a handler: queued messages are dropped, sends
//   and fetches in flight to live peers finish and the endpoints are flushed (at most 1 s in all), the
//   progress thread is joined, the workers and the context destroyed. send() throws CommError before
//   start() and after shutdown(), InvalidArgument for an unknown peer, WireError for a message that cannot
//   be framed. A send to this worker's own id is delivered on the progress thread with copies of the
//   tensors.
//
// Under ThreadSanitizer, run with UCX_MEM_MMAP_HOOK_MODE=none (cmake/Sanitizers.cmake explains why).
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace braid::rpc {

std::unique_ptr<Transport> make_ucx_transport(const TransportOptions& options);

}  // namespace braid::rpc
