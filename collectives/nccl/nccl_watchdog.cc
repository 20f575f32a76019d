#include "collectives/nccl/nccl_watchdog.h"

#include <fmt/format.h>


#include "base/logging.h"

namespace braid::collectives::nccl {

namespace {

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.collectives"); }

}  // namespace

std::shared_ptr<NcclWatchdog> NcclWatchdog::shared() {
  // Leaked on purpose: groups may be destroyed during static destruction, after a local static would be.
  static auto* mu = new std::mutex();
  static auto* current = new std::weak_ptr<NcclWatchdog>();
  std::lock_guard<std::mutex> lock(*mu);
  auto watchdog = current->lock();
  if (!watchdog) {
    watchdog = std::make_shared<NcclWatchdog>();
    *current = watchdog;
  }
  return watchdog;
}

NcclWatchdog::NcclWatchdog() { thread_ = std::thread([this] { loop(); }); }

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NcclWatchdog::abort_async(std::shared_ptr<NcclComm> comm, const std::string& reason,
                               std::shared_ptr<void> keepalive) {
  if (!comm) return;
  // Marked here, synchronously, so that nothing issues on the communicator any more even before the
  // watchdog thread gets to it.
  if (!comm->mark_aborted(reason) && !keepalive) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(Job{std::move(comm), reason, std::move(keepalive)});
  }
  cv_.notify_all();
}

NcclWatchdog::Watch NcclWatchdog::watch(std::shared_ptr<NcclComm> comm, const Deadline& deadline, std::string what) {
  if (deadline.is_never() || !comm) return Watch();
  // Saturate instead of overflowing for deadlines near the clock's maximum.
  const auto fire_at = deadline.at() > Clock::time_point::max() - kGrace ? Clock::time_point::max()
                                                                          : deadline.at() + kGrace;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    armed_.emplace(id, Armed{std::move(comm), fire_at, std::move(what)});
  }
  // No notify: the thread looks at the watches every kTick, which is precise enough for a backstop that
  // fires seconds late by design, and keeps arming (once per op) to a map insertion.
  return Watch(this, id);
}

NcclWatchdog::Watch::~Watch() {
  if (owner_ != nullptr) owner_->disarm(id_);
}

void NcclWatchdog::disarm(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_.erase(id);
}

void NcclWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Aborts first: they are what ops that already failed are waiting on.
    while (!jobs_.empty()) {
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      logger()->warn("aborting nccl communicator {}: {}", job.comm->name(), job.reason);
      job.comm->abort(job.reason);
      job = Job{};  // releases the communicator and the op's buffers outside the lock
      lock.lock();
    }
    if (stop_) return;
    const auto now = Clock::now();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.fire_at <= now) {
        const std::string reason = fmt::format(
            "{} was still running {} ms after its deadline (its thread is stuck in a CUDA or NCCL call); the "
            "watchdog aborted the communicator",
            it->second.what, kGrace.count());
        auto comm = std::move(it->second.comm);
        it = armed_.erase(it);
        comm->mark_aborted(reason);
        jobs_.push_back(Job{std::move(comm), reason, {}});
      } else {
        ++it;
      }
    }
    if (!jobs_.empty()) continue;
    cv_.wait_for(lock, kTick, [&] { return stop_ || !jobs_.empty(); });
  }
}

}  // namespace braid::collectives::nccl
