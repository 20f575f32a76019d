// NcclWatchdog: the thread that aborts NCCL communicators, one per process, shared by every NCCL group
// (it lives while any group holds it).
//
// Two jobs:
//   * abort_async(): the op that saw a timeout or an NCCL error fails at once, and the watchdog runs the
//     ncclCommAbort, which can block until the device drains. The op's buffers are kept alive until the
//     abort has returned, so no aborted kernel ever writes into memory that was handed out again.
//   * watch(): a backstop for an op whose thread got stuck inside a CUDA or NCCL call (a launch queue
//     full behind a hung kernel, say) and so cannot notice its own deadline: when a watch is still armed
//     kGrace after its deadline, the watchdog aborts the communicator, which unblocks the call.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "collectives/nccl/nccl_comm.h"

namespace braid::collectives::nccl {

class NcclWatchdog {
 public:
  // How long after its deadline an armed watch fires, and how often the watches are looked at.
  static constexpr Millis kGrace{2000};
  static constexpr Millis kTick{250};

  // The process's watchdog, started on first use; it stops when the last holder lets go.
  static std::shared_ptr<NcclWatchdog> shared();

  NcclWatchdog();
  // Runs the aborts still queued, then joins the thread.
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // Marks `comm` aborted now (later calls on it fail with `reason`) and aborts it on the watchdog thread.
  // `keepalive` (typically the op's tensors) is released only after ncclCommAbort returned.
  void abort_async(std::shared_ptr<NcclComm> comm, const std::string& reason, std::shared_ptr<void> keepalive = {});

  // An armed watch; disarmed when destroyed.
  class Watch {
   public:
    Watch() = default;
    Watch(NcclWatchdog* owner, uint64_t id) : owner_(owner), id_(id) {}
    ~Watch();
    Watch(Watch&& other) noexcept : owner_(other.owner_), id_(other.id_) { other.owner_ = nullptr; }
    Watch& operator=(Watch&&) = delete;
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    NcclWatchdog* owner_ = nullptr;
    uint64_t id_ = 0;
  };
  // Aborts `comm` if the returned Watch still exists at deadline + kGrace. A never-expiring deadline
  // arms nothing.
  [[nodiscard]] Watch watch(std::shared_ptr<NcclComm> comm, const Deadline& deadline, std::string what);

 private:
  struct Job {
    std::shared_ptr<NcclComm> comm;
    std::string reason;
    std::shared_ptr<void> keepalive;
  };
  struct Armed {
    std::shared_ptr<NcclComm> comm;
    Clock::time_point fire_at;
    std::string what;
  };

  void loop();
  void disarm(uint64_t id);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;              // guarded by mu_
  std::map<uint64_t, Armed> armed_;   // guarded by mu_
  uint64_t next_id_ = 1;              // guarded by mu_
  bool stop_ = false;                 // guarded by mu_
  std::thread thread_;
};

}  // namespace braid::collectives::nccl
