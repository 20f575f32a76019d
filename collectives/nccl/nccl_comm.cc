#include "collectives/nccl/nccl_comm.h"

#include <fmt/format.h>

#include <cstring>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/nccl/backoff.h"
#include "collectives/nccl/cuda_handles.h"
#include "collectives/nccl/nccl_types.h"

namespace braid::collectives::nccl {

namespace {

// How long the destructor lets ncclCommFinalize flush before it aborts instead: at that point every op
// of the communicator has completed, so finalize only drains NCCL's proxy and network resources.
constexpr Millis kFinalizeBudget{10'000};

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.collectives"); }

}  // namespace

NcclComm::NcclComm(int nranks, int rank, const ncclUniqueId& id, int device, std::string name)
    : name_(std::move(name)), device_(device) {
  DeviceGuard guard(device_);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name_.c_str();
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, nranks, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string text = describe_nccl_error(r, comm_);
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    BRAID_THROW(CommError, "nccl communicator {} (rank {} of {}, cuda:{}): ncclCommInitRankConfig failed: {}", name_,
                rank, nranks, device_, text);
  }
}

NcclComm::~NcclComm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr) return;
  try {
    DeviceGuard guard(device_);
    if (!aborted_.load()) {
      ncclResult_t r = ncclCommFinalize(comm_);
      const Deadline deadline = Deadline::after(kFinalizeBudget);
      Backoff backoff;
      ncclResult_t state = r;
      while (r == ncclSuccess || r == ncclInProgress) {
        r = ncclCommGetAsyncError(comm_, &state);
        if (r != ncclSuccess || state != ncclInProgress || deadline.expired()) break;
        backoff.pause();
      }
      if (r == ncclSuccess && state == ncclSuccess) {
        (void)ncclCommDestroy(comm_);
        comm_ = nullptr;
        return;
      }
      logger()->warn("nccl communicator {}: finalize did not complete ({}); aborting it instead", name_,
                     state == ncclInProgress ? std::string("still in progress after 10 s")
                                             : describe_nccl_error(state, comm_));
    }
    (void)ncclCommAbort(comm_);
  } catch (const std::exception& e) {
    logger()->warn("nccl communicator {}: destroying failed: {}", name_, e.what());
  }
  comm_ = nullptr;
}

std::string NcclComm::abort_reason() const {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return reason_;
}

bool NcclComm::mark_aborted(const std::string& reason) {
  std::lock_guard<std::mutex> lock(reason_mu_);
  if (aborted_.load()) return false;
  reason_ = reason;
  aborted_.store(true);
  return true;
}

void NcclComm::abort(const std::string& reason) {
  mark_aborted(reason);
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr) return;
  try {
    DeviceGuard guard(device_);
    const ncclResult_t r = ncclCommAbort(comm_);
    if (r != ncclSuccess) {
      logger()->warn("nccl communicator {}: ncclCommAbort returned {}", name_, describe_nccl_error(r, nullptr));
    }
  } catch (const std::exception& e) {
    logger()->warn("nccl communicator {}: abort failed: {}", name_, e.what());
  }
  comm_ = nullptr;
}

void NcclComm::throw_aborted(std::string_view what, std::string_view call) const {
  BRAID_THROW(CommError, "{}: {} on nccl communicator {} refused: the communicator was aborted ({})", what, call,
              name_, abort_reason());
}

void NcclComm::wait_ready(const Deadline& deadline, std::string_view what) {
  settle(what, "ncclCommInitRankConfig", deadline);
}

bool NcclComm::poll_ready(std::string_view what) {
  return poll_state(what, "ncclCommInitRankConfig") == ncclSuccess;
}

void NcclComm::run(std::string_view what, std::string_view call, const Deadline& deadline,
                   const std::function<ncclResult_t(ncclComm_t)>& calls) {
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load() || comm_ == nullptr) throw_aborted(what, call);
    r = calls(comm_);
    if (r != ncclSuccess && r != ncclInProgress) {
      BRAID_THROW(CommError, "{}: {} failed on nccl communicator {}: {}", what, call, name_,
                  describe_nccl_error(r, comm_));
    }
  }
  if (r == ncclInProgress) settle(what, call, deadline);
}

void NcclComm::check_healthy(std::string_view what) {
  if (aborted_.load()) throw_aborted(what, "waiting");
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // an abort (or the issuing thread) holds it; checked again next poll
  if (comm_ == nullptr) throw_aborted(what, "waiting");
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) state = r;
  if (state != ncclSuccess && state != ncclInProgress) {
    BRAID_THROW(CommError, "{}: nccl communicator {} reported an asynchronous error: {}", what, name_,
                describe_nccl_error(state, comm_));
  }
}

ncclResult_t NcclComm::poll_state(std::string_view what, std::string_view call) {
  if (aborted_.load()) throw_aborted(what, call);
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr) throw_aborted(what, call);
  ncclResult_t state = ncclInProgress;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) state = r;
  if (state != ncclSuccess && state != ncclInProgress) {
    BRAID_THROW(CommError, "{}: {} failed on nccl communicator {}: {}", what, call, name_,
                describe_nccl_error(state, comm_));
  }
  return state;
}

void NcclComm::settle(std::string_view what, std::string_view call, const Deadline& deadline) {
  Backoff backoff;
  while (poll_state(what, call) == ncclInProgress) {
    if (deadline.expired()) {
      BRAID_THROW(TimeoutError, "{}: {} on nccl communicator {} was still in progress at the deadline", what, call,
                  name_);
    }
    backoff.pause();
  }
}

// ---- unique ids through the store ----

namespace {

store::Bytes to_bytes(const ncclUniqueId& id) {
  const auto* p = reinterpret_cast<const uint8_t*>(&id);
  return store::Bytes(p, p + sizeof(id));
}

ncclUniqueId from_bytes(const store::Bytes& bytes, const std::string& key) {
  BRAID_CHECK_TYPED(CommError, bytes.size() == sizeof(ncclUniqueId),
                    "nccl: the store value under '{}' is {} bytes, not an NCCL unique id ({} bytes)", key,
                    bytes.size(), sizeof(ncclUniqueId));
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

}  // namespace

ncclUniqueId local_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) BRAID_THROW(CommError, "nccl: ncclGetUniqueId failed: {}", describe_nccl_error(r, nullptr));
  return id;
}

ncclUniqueId publish_unique_id(store::Store& store, const std::string& key) {
  const ncclUniqueId id = local_unique_id();
  store.set(key, to_bytes(id));
  return id;
}

ncclUniqueId read_unique_id(store::Store& store, const std::string& key, const Deadline& deadline,
                            std::string_view what, int creator) {
  try {
    return from_bytes(store.get(key, deadline.remaining()), key);
  } catch (const TimeoutError& e) {
    BRAID_THROW(TimeoutError, "{}: rank {} never published the NCCL unique id (store key '{}'): {}", what, creator, key,
                e.what());
  }
}

std::optional<ncclUniqueId> try_read_unique_id(store::Store& store, const std::string& key) {
  if (!store.check({key})) return std::nullopt;
  return from_bytes(store.get(key, Millis(1000)), key);
}

}  // namespace braid::collectives::nccl
