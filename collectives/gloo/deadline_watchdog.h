// Stops a lane's wait when its op's deadline passes, for waits gloo cannot bound itself.
//
// gloo's registered buffers wait with the timeout their pair got when it connected, not the op's. A lane
// arms its op's deadline here before such a wait and disarms it after; if the deadline passes first, the
// watchdog's thread calls that lane's `on_expiry` (RegisteredExchange::abort), as NCCL's watchdog aborts a
// communicator. Arming costs a lock and, only when the new deadline is earlier than the one the thread
// sleeps until, a wake-up: ops with one timeout arm ever later deadlines and never wake it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/deadline.h"

namespace braid::collectives::gloo {

class DeadlineWatchdog {
 public:
  // One callback per lane; they run on the watchdog's thread, which starts with the first arm().
  explicit DeadlineWatchdog(std::vector<std::function<void()>> on_expiry);
  ~DeadlineWatchdog();  // joins the thread
  DeadlineWatchdog(const DeadlineWatchdog&) = delete;
  DeadlineWatchdog& operator=(const DeadlineWatchdog&) = delete;

  // A deadline that never expires is not armed. One armed deadline per lane at a time.
  void arm(size_t lane, const Deadline& deadline);
  void disarm(size_t lane);

  // Disarms on destruction.
  class Armed {
   public:
    Armed(DeadlineWatchdog& watchdog, size_t lane, const Deadline& deadline) : watchdog_(watchdog), lane_(lane) {
      watchdog_.arm(lane_, deadline);
    }
    ~Armed() { watchdog_.disarm(lane_); }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    DeadlineWatchdog& watchdog_;
    size_t lane_;
  };

 private:
  void run();

  const std::vector<std::function<void()>> on_expiry_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Clock::time_point> armed_;  // time_point::max() where none
  Clock::time_point sleeping_until_ = Clock::time_point::max();
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace braid::collectives::gloo
