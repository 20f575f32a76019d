// NcclComm: one NCCL communicator, created non-blocking and shared by the thread that issues its ops and
// the watchdog that may abort it.
//
// Non-blocking (ncclConfig_t.blocking = 0) because then no NCCL call can hold the calling thread: init,
// collectives and group ends return ncclInProgress at worst, and the engine polls
// ncclCommGetAsyncError against the op's deadline. A blocking init whose peer never comes, by contrast,
// cannot be interrupted, and ncclCommAbort from another thread is the only way out.
//
// Locking: every NCCL call on the handle runs under mu_, and so does ncclCommAbort, so an abort never
// frees the communicator under a running call. `aborted_` is set before the abort takes the lock, and
// pollers check it first, so a poller never queues behind a long abort (ncclCommAbort can block until
// the device drains).
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <nccl.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/deadline.h"
#include "store/store.h"

namespace braid::collectives::nccl {

class NcclComm {
 public:
  // Starts ncclCommInitRankConfig on `device`; wait_ready() finishes it. `name` appears in NCCL's logs
  // and in braid's messages ("group 'world' lane 0", "group 'world' p2p 1-3").
  NcclComm(int nranks, int rank, const ncclUniqueId& id, int device, std::string name);
  // Finalizes and destroys the communicator (bounded: it is aborted when finalize does not finish within
  // a few seconds), or does nothing when it was aborted already.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const std::string& name() const { return name_; }
  int device() const { return device_; }

  // Waits until initialisation has finished. TimeoutError at the deadline, CommError when NCCL fails.
  void wait_ready(const Deadline& deadline, std::string_view what);
  // The same without waiting: whether initialisation has finished (CommError when it failed).
  bool poll_ready(std::string_view what);

  // Runs `calls` (one NCCL call, or a ncclGroupStart ... ncclGroupEnd sequence) on the handle under the
  // lock, then waits out ncclInProgress up to `deadline`. CommError names `what` and `call` when NCCL
  // fails or the communicator was aborted; TimeoutError when still in progress at the deadline. The
  // caller must have set the device (DeviceGuard).
  void run(std::string_view what, std::string_view call, const Deadline& deadline,
           const std::function<ncclResult_t(ncclComm_t)>& calls);

  // Throws CommError when the communicator was aborted or NCCL reports an asynchronous error (a peer
  // failed, a network error). Never blocks.
  void check_healthy(std::string_view what);

  bool aborted() const { return aborted_.load(); }
  std::string abort_reason() const;
  // Marks the communicator unusable: later calls fail with CommError naming `reason` (the first reason
  // wins). Returns whether this call marked it. Does not free anything; abort() does.
  bool mark_aborted(const std::string& reason);
  // ncclCommAbort: stops every op of the communicator and frees it. Idempotent; may block until the
  // device drains, which is why the watchdog calls it rather than the op's own thread.
  void abort(const std::string& reason);

 private:
  [[noreturn]] void throw_aborted(std::string_view what, std::string_view call) const;
  // ncclCommGetAsyncError once: ncclSuccess or ncclInProgress; CommError for anything else.
  ncclResult_t poll_state(std::string_view what, std::string_view call);
  // Polls it until it leaves ncclInProgress.
  void settle(std::string_view what, std::string_view call, const Deadline& deadline);

  const std::string name_;
  const int device_;
  std::mutex mu_;
  ncclComm_t comm_ = nullptr;  // guarded by mu_; null once aborted or destroyed
  std::atomic<bool> aborted_{false};
  mutable std::mutex reason_mu_;
  std::string reason_;  // guarded by reason_mu_
};

// The NCCL unique id of a communicator travels through the group's store under `key`: its creator
// (rank 0 of the communicator) publishes it; the others read it.
ncclUniqueId publish_unique_id(store::Store& store, const std::string& key);
// Waits for the id up to `deadline`; TimeoutError naming what, the key and the creator's rank.
ncclUniqueId read_unique_id(store::Store& store, const std::string& key, const Deadline& deadline,
                            std::string_view what, int creator);
// The id if it has been published already (no waiting).
std::optional<ncclUniqueId> try_read_unique_id(store::Store& store, const std::string& key);
// An id for a communicator of one rank (no store needed).
ncclUniqueId local_unique_id();

}  // namespace braid::collectives::nccl
