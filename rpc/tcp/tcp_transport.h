// The TCP transport of the RPC agent, over Boost.Asio (rpc/transport.h describes the interface).
//
// Design (the code is in rpc/tcp/*.cc; tcp_transport_impl.h and tcp_connection.h are private):
//
// * Threads. One io_context run by TransportOptions::io_threads threads that start() creates and
//   shutdown() joins. Every connection has its own strand, so with several threads the frames of one
//   connection are still read, delivered and written in order. handlers.on_message runs directly on the
//   io thread that read the frame (no hand-off), and so does on_peer_failure.
//
// * One connection per peer pair, made lazily by the first send() to a peer. A connection starts with a
//   handshake: the initiator sends a kHello frame whose request id is its worker id, the acceptor answers
//   with its own kHello, and only then does the initiator send the messages it queued. Until the answer
//   the messages wait in the peer's queue, so a connection that loses a race never carried any.
//   When both sides connect at once, the connection initiated by the lower worker id survives: the
//   acceptor with the lower id declines (closes) the other one, and the side with the higher id adopts
//   the incoming connection and abandons its own attempt. An attempt that fails (refused, timed out,
//   closed before the answer, declined) is retried after connect_backoff, doubled per attempt up to
//   connect_backoff_max, at most connect_retries attempts in all; then on_peer_failure reports the peer
//   unreachable and its queued messages are dropped. A later send() starts over.
//
// * Sending never blocks on the network. The frame prefix (header + tensor table + meta, rpc/wire.h) is
//   encoded by the caller into a pooled buffer; tensor bytes are never copied: a write is a gather of the
//   prefix and the tensors' own storage. When nothing is being written on the connection, send() tries a
//   non-blocking sendmsg() right away from the calling thread (no io-thread wake-up on the fast path);
//   what the socket does not take, and everything queued meanwhile, is written by one async_write of
//   all queued frames (coalescing). Replies that handlers send inline on an io thread wait until the
//   io thread has delivered every frame of the current read, then go out in one sendmsg() (a burst of 64
//   calls costs one write, not 64). A message, and so its tensors, lives until its bytes are written.
//
// * Receiving reads into a 64 KiB buffer, which parses the fixed header and the table + meta of as many
//   frames as arrived together (one recv for many small messages). Tensors are allocated from the table
//   and their bytes are read straight into tensor storage; only the part of a payload that arrived in the
//   same recv as its header (at most the buffer's 64 KiB) is copied out of the buffer.
//
// * Errors. A malformed frame (rpc/wire.h's checks, a frame before the handshake, a hello naming an
//   unknown or invalid worker) closes that connection and logs an error naming the remote endpoint, the
//   worker when known, and the problem; it never throws out of an io thread. A connection to a known peer
//   that breaks calls on_peer_failure(peer, reason) once. Connections closed by shutdown() report nothing.
//
// send() throws InvalidArgument for an unknown peer, WireError for a message that cannot be framed
// (e.g. a non-contiguous tensor) and CommError before start() or after shutdown(). A send to this worker's
// own id is delivered on an io thread with copies of the tensors, as if it had crossed the network.
// shutdown() must not be called from a handler (an io thread cannot join itself).
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace braid::rpc {

std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options);

}  // namespace braid::rpc
