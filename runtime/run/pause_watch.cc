#include "runtime/run/pause_watch.h"

#include <fmt/format.h>

namespace braid::runtime {

namespace {

constexpr auto kTick = std::chrono::milliseconds(100);

std::mutex g_mu;
std::optional<PauseWatch::Pause> g_last;  // GUARDED_BY(g_mu)
// The running watch's last tick and threshold: a thread that wakes from a stop before the watch's thread
// does (which then records the pause) still sees the pause in progress.
std::optional<PauseWatch::Clock::time_point> g_last_tick;  // GUARDED_BY(g_mu)
PauseWatch::Clock::duration g_threshold{};                   // GUARDED_BY(g_mu)

}  // namespace

PauseWatch::PauseWatch(Clock::duration threshold) : threshold_(threshold), thread_([this] { run(); }) {}

PauseWatch::~PauseWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PauseWatch::run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto last = Clock::now();
  const auto note_tick = [this](Clock::time_point t) {
    std::lock_guard<std::mutex> g(g_mu);
    g_last_tick = t;
    g_threshold = threshold_;
  };
  note_tick(last);
  while (!cv_.wait_for(lock, kTick, [this] { return stop_; })) {
    const auto now = Clock::now();
    if (const auto late = now - last - kTick; late >= threshold_) record(Pause{late, now});
    last = now;
    note_tick(now);
  }
  std::lock_guard<std::mutex> g(g_mu);
  g_last_tick.reset();
}

void PauseWatch::record(Pause p) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_last = p;
}

std::optional<PauseWatch::Pause> PauseWatch::recent(Clock::duration window) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto now = Clock::now();
  if (g_last_tick) {
    if (const auto late = now - *g_last_tick - kTick; late >= g_threshold) return Pause{late, now};
  }
  if (!g_last || now - g_last->ended > window) return std::nullopt;
  return g_last;
}

PauseWatch::Clock::duration PauseWatch::window_for(double failure_timeout_s) {
  return std::chrono::milliseconds(static_cast<int64_t>(failure_timeout_s * 2000)) + std::chrono::seconds(5);
}

std::string PauseWatch::describe_recent(Clock::duration window) {
  const auto p = recent(window);
  if (!p) return "";
  using Seconds = std::chrono::duration<double>;
  return fmt::format("this process did not run for {:.1f} s (stopped, or starved of CPU), until {:.1f} s ago",
                     Seconds(p->length).count(), Seconds(Clock::now() - p->ended).count());
}

}  // namespace braid::runtime
