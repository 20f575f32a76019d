#include "collectives/gloo/deadline_watchdog.h"

#include <algorithm>

#include "base/check.h"

namespace braid::collectives::gloo {

namespace {
constexpr Clock::time_point kNone = Clock::time_point::max();
}  // namespace

DeadlineWatchdog::DeadlineWatchdog(std::vector<std::function<void()>> on_expiry)
    : on_expiry_(std::move(on_expiry)), armed_(on_expiry_.size(), kNone) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeadlineWatchdog::arm(size_t lane, const Deadline& deadline) {
  BRAID_ASSERT(lane < armed_.size(), "lane {} of {}", lane, armed_.size());
  if (deadline.is_never()) return;
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    armed_[lane] = deadline.at();
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { run(); });
    } else {
      wake = deadline.at() < sleeping_until_;
    }
  }
  if (wake) cv_.notify_one();
}

void DeadlineWatchdog::disarm(size_t lane) {
  std::lock_guard lock(mu_);
  armed_[lane] = kNone;
}

void DeadlineWatchdog::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto now = Clock::now();
    for (size_t lane = 0; lane < armed_.size(); ++lane) {
      if (armed_[lane] > now) continue;
      armed_[lane] = kNone;
      lock.unlock();  // the callback takes the exchange's own lock
      on_expiry_[lane]();
      lock.lock();
    }
    // Checked again under the same hold of the lock as the wait: a stop requested while a callback ran
    // (unlocked) would otherwise be missed.
    if (stopping_) break;
    sleeping_until_ = *std::min_element(armed_.begin(), armed_.end());
    if (sleeping_until_ == kNone) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, sleeping_until_);
    }
  }
}

}  // namespace braid::collectives::gloo
