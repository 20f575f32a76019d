// RAII owners of the UCX objects the transport uses (private to rpc/ucx/): the ucp context and its
// workers, plus the helpers every file of the transport needs (status text, the address format).
//
// Thread affinity: workers run in UCS_THREAD_MODE_SINGLE, so exactly one thread at a time may call into
// one — the transport's progress thread between start() and the end of its loop, the owning thread
// before and after. The hand-over is ordered by the thread's creation and join.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "security/stream_token.h"

namespace braid::rpc::ucx_detail {

// "Endpoint timeout (UCX status -80)".
std::string status_text(ucs_status_t status);

// A transport's address: the nonce of this transport incarnation (security/stream_token.h) and its data
// worker's and monitor worker's ucp addresses,
//   nonce (32 bytes), u32 length of the data worker's address (little-endian), data worker's address,
//   monitor worker's.
// Peers read it from the job's (authenticated) store, so the nonce reaches only holders of the secret.
struct WorkerAddresses {
  std::vector<uint8_t> data;
  std::vector<uint8_t> monitor;
  security::Nonce nonce{};
};
std::vector<uint8_t> pack_addresses(const WorkerAddresses& addresses);
// InvalidArgument naming `what` when the bytes are not a nonce and a packed pair of non-empty addresses.
WorkerAddresses unpack_addresses(const std::vector<uint8_t>& bytes, const std::string& what);

// The ucp context: features AM (messages) and WAKEUP (the progress thread sleeps on the worker's event
// fd). Configuration comes from the UCX_* environment, with the defaults below for what the user left
// unset (docs in ucx_transport.h):
//   UCX_KEEPALIVE_INTERVAL=5s  a silent peer host is noticed in seconds rather than UCX's default 20 s
class UcxContext {
 public:
  // Unless the environment sets UCX_NET_DEVICES, UCX's network devices follow `bind_host`, the address the
  // tcp transport would listen on (TransportOptions::bind_host, BRAID_SOCKET_IFNAME's under braid run):
  // loopback keeps a one-host job's UCX listeners on `lo` (its peers are reached through shared memory,
  // the failure monitors through tcp on loopback) instead of on every interface; the address of an
  // interface takes that interface. Anything else (a host name) leaves UCX's default, every device.
  explicit UcxContext(const std::string& bind_host);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h get() const { return context_; }

 private:
  ucp_context_h context_ = nullptr;
};

class UcxWorker {
 public:
  explicit UcxWorker(const UcxContext& context);
  ~UcxWorker() { destroy(); }
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }
  // What a peer passes to ucp_ep_create (ucp_worker_get_address), copied.
  const std::vector<uint8_t>& address() const { return address_; }
  // The largest user header ucp_am_send_nbx accepts on this worker.
  size_t max_am_header() const { return max_am_header_; }
  // Becomes readable when the worker has events after arm() returned true (ucp_worker_get_efd).
  int event_fd() const { return event_fd_; }

  // Progresses until UCX reports no more work (bounded, so that a flood cannot starve the caller's loop);
  // returns whether anything happened.
  bool progress();
  enum class Armed { kYes, kBusy, kFailed };
  // Arms the event fd for the next event. kBusy: events are already pending (progress again instead of
  // sleeping); kFailed: the fd cannot be armed (logged), so the caller must not sleep on it for long.
  Armed arm();
  // Destroys the worker (its endpoints and pending requests go with it, their callbacks may run here).
  void destroy();

 private:
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  size_t max_am_header_ = 0;
  int event_fd_ = -1;
  bool arm_failed_ = false;
};

}  // namespace braid::rpc::ucx_detail
