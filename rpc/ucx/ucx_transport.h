// The UCX transport of the RPC agent, over UCX's ucp API (rpc/transport.h describes the interface).
//
// Design (the code is in rpc/ucx/*.cc; ucx_context.h, ucx_envelope.h, ucx_receiver.h and
// ucx_transport_impl.h are private):
//
// * One ucp context (features AM and WAKEUP) and one worker in UCS_THREAD_MODE_SINGLE. Every UCX call
//   after start() is made by one progress thread, which start() creates and shutdown() joins; send()
//   only queues. The thread polls (ucp_worker_progress) for 50 us after its last event, then arms the
//   worker and sleeps in poll() on the worker's event fd and an eventfd that send() writes when it
//   finds the thread asleep; so it wakes at once for both network events and local sends.
//
// * local_address() is the worker address (ucp_worker_get_address). Endpoints are created lazily by the
//   first send() to a peer, two per peer: a data endpoint without error handling, which lets UCX pick
//   shared memory on one host (sysv/posix for small messages, cma single-copy for large ones; tcp or
//   RDMA across hosts), and a monitor endpoint with UCP_ERR_HANDLING_MODE_PEER that carries nothing.
//   UCX 1.13's shared-memory transports cannot report a peer failure ("no peer failure handler"), so
//   error mode PEER on the data endpoint would force every message onto tcp (15 us instead of 1.4 us
//   per 64-byte round trip here, 1.3 instead of 3.9 GB/s for a 16 MiB echo); the monitor endpoint picks
//   tcp (or another transport that can), and its error handler fires within milliseconds when the peer's
//   worker goes away — a process that exits or is killed, or a transport that shuts down. UCX keepalive
//   (UCX_KEEPALIVE_INTERVAL, 5 s unless set in the environment) covers a peer host that goes silent.
//   Without tcp in UCX_TLS no monitor can be made: the transport logs a warning once and cannot notice
//   peer failures. There is no connect retry: an endpoint is created locally from the address (a
//   failure is reported at once), so connect_retries / backoff, bind_host/bind_port and io_threads of
//   TransportOptions do not apply; limits do.
//
// * A message is one active message: the user header is a 32-byte envelope (sender id, stream, sequence
//   number; ucx_envelope.h) followed by the frame prefix of rpc/wire.h (header + tensor table + meta)
//   when it fits the worker's AM header limit (8 KiB here), and the data is the tensors' own storage
//   (one IOV entry per tensor, no copy; the Message lives until UCX completes the send). UCX sends small
//   messages eagerly (the receiver copies them into freshly allocated tensors) and large ones by
//   rendezvous, which ucp_am_recv_data_nbx fetches straight into the tensors' storage. A prefix too large
//   for the header goes in front of the data instead, at the cost of one copy on the receiver.
//
// * Order. UCX runs the AM handler in send order, but a rendezvous completes later than an eager message
//   sent after it; the receiver delivers each (sender, stream) strictly by sequence number, holding
//   early arrivals back (ucx_receiver.h). A stream is one connection: after a failure the next send()
//   makes new endpoints and a new stream.
//
// * Failures. A monitor or send error, a failed fetch, or a malformed frame (logged, naming the peer and
//   the field; the rest of that stream is dropped and the sender is told with a reset message, so it
//   reports the failure too and reconnects) closes the connection and calls on_peer_failure once; the
//   next send() connects again. Endpoints that this worker closes itself (shutdown) report nothing.
//   The failure of a peer that this worker never sent to is not reported (there is no monitor for it).
//
// * shutdown() is idempotent and must not be called from a handler: queued messages are dropped, the
//   endpoints are flushed and closed (at most 1 s, then destroyed with the worker), the progress thread
//   joined, the worker and context destroyed. send() throws CommError before start() and after
//   shutdown(), InvalidArgument for an unknown peer, WireError for a message that cannot be framed. A
//   send to this worker's own id is delivered on the progress thread with copies of the tensors.
//
// Under ThreadSanitizer, run with UCX_MEM_MMAP_HOOK_MODE=none (cmake/Sanitizers.cmake explains why).
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace braid::rpc {

std::unique_ptr<Transport> make_ucx_transport(const TransportOptions& options);

}  // namespace braid::rpc
