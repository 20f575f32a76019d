// Transport: how the RPC agent moves messages between workers. Implementations: TCP over Boost.Asio
// (rpc/tcp/) and UCX (rpc/ucx/); tests run the same suite on both.
//
// Life cycle (the agent drives it):
//   1. construct with TransportOptions; local_address() is what peers need to reach this worker, and the
//      agent publishes it in the rendezvous store;
//   2. start(self, handlers): listen and begin delivering messages to handlers.on_message;
//   3. add_peers(peers): every other worker's id, name and address (from the store); connections are
//      made lazily, on the first send, with bounded retry and backoff. May come before start() (the
//      agent does so, so that a peer connecting at once is already known);
//   4. send(peer, msg) any number of times from any thread; messages to one peer arrive in send order;
//   5. shutdown(): closes every connection and joins every thread the transport started. Idempotent.
//
// Failures: a connection that breaks, a peer that cannot be reached within the connect retries, or a
// malformed frame (logged, naming the peer and the field) ends that connection and calls
// handlers.on_peer_failure(peer, reason) once for it; the agent fails every pending call towards that peer.
// A later send() to that peer tries to connect again. Handlers run on transport threads: they must not
// block for long (the agent hands work to its thread pool).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rpc/message.h"
#include "rpc/wire.h"
#include "security/job_secret.h"

namespace braid::rpc {

struct TransportOptions {
  std::string bind_host = "127.0.0.1";  // interface (address or host name) to listen on
  int bind_port = 0;                    // 0: any free port
  WireLimits limits;
  int connect_retries = 8;                                   // attempts before a peer counts as unreachable (~1 s)
  std::chrono::milliseconds connect_backoff{10};             // first pause, doubled per attempt
  std::chrono::milliseconds connect_backoff_max{250};        // longest pause
  int io_threads = 1;                                         // threads running the transport's I/O
  // tcp: SO_SNDBUF of every connection. Linux starts a socket's send buffer at tcp_wmem's 16 KiB default, so
  // a 256 KiB frame did not leave in the caller's non-blocking sendmsg() and the rest waited for an io-thread
  // wake-up. The kernel caps it at net.core.wmem_max; 0 keeps the kernel's autotuning.
  int socket_send_buffer = 4 << 20;
  // tcp: a connection whose connect + hello exchange takes longer is closed (an outgoing one is retried
  // as connect_retries allows); the error names the endpoint and this limit.
  std::chrono::milliseconds handshake_timeout{5000};
  // The job secret every connection proves before its first frame (security/handshake.h); unset: the
  // process's (security::job_secret()). A peer without it is dropped, and logged with its address.
  std::optional<security::JobSecret> secret;
};

struct PeerInfo {
  int id = -1;
  std::string name;
  std::vector<uint8_t> address;  // the peer's local_address()
};

struct TransportHandlers {
  // A complete, validated message from `peer`.
  std::function<void(int peer, Message msg)> on_message;
  // `peer` is unreachable or its connection broke; `reason` says how (for error messages).
  std::function<void(int peer, const std::string& reason)> on_peer_failure;
};

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // "tcp" or "ucx".
  virtual std::string name() const = 0;
  // Bytes a peer passes to add_peers() to reach this worker (valid after construction).
  virtual std::vector<uint8_t> local_address() const = 0;
  // A readable form of an address, for logs and errors ("127.0.0.1:41234", "ucx worker (312 bytes)").
  virtual std::string describe_address(const std::vector<uint8_t>& address) const = 0;

  virtual void start(int self_id, TransportHandlers handlers) = 0;
  virtual void add_peers(const std::vector<PeerInfo>& peers) = 0;
  // Queues `msg` for `peer` and returns; never blocks on the network. An unknown peer id throws
  // InvalidArgument. Delivery failures are reported through on_peer_failure.
  virtual void send(int peer, Message msg) = 0;
  virtual void shutdown() = 0;

 protected:
  Transport() = default;
};

// Which transport a requested name means, and why (for the startup log and for the error a job whose
// workers disagree gets). "auto", the default, is ucx when braid was built with UCX, which then picks
// shared memory between workers on one host and the network between hosts, and tcp otherwise; "tcp" and
// "ucx" are taken as asked. InvalidArgument for another name, or "ucx" in a build without it, naming the
// names this build knows.
struct TransportChoice {
  std::string name;    // "tcp" or "ucx"
  std::string reason;  // "auto: braid was built with UCX 1.13.1 (...)", "asked for"
};
TransportChoice choose_transport(const std::string& requested);

// Creates the transport `requested` stands for (choose_transport). When "auto" picked ucx and UCX cannot
// start here (no usable device, a broken UCX configuration), it logs a warning and falls back to tcp,
// saying so in `reason`; an explicit "ucx" fails instead. `reason`, when given, receives why the transport
// was chosen.
std::unique_ptr<Transport> create_transport(const std::string& requested, const TransportOptions& options,
                                            std::string* reason = nullptr);

}  // namespace braid::rpc
