// OpQueue's lanes and watcher (op_queue.h).
#include "collectives/queue/op_queue.h"

#include <sched.h>

#include <algorithm>
#include <deque>

#include "base/check.h"

namespace braid::collectives {

namespace {

// How long an idle lane looks for the next op before it sleeps (see lane_loop).
constexpr std::chrono::microseconds kLaneSpin{30};
// How long wait() spins for a small op before it blocks.
constexpr std::chrono::microseconds kWaitSpin{30};
// Waiter mode (see Lane) ends after this long without ops.
constexpr Millis kWaiterIdle{20};

// Set while a waiter runs ops in Lane::help (OpQueue::on_waiting_thread).
thread_local bool t_running_for_waiter = false;

}  // namespace

// One lane: a queue of ops run in issue order by the lane's thread or, when the lane is idle, by a thread
// that waits for one of them (Work::wait -> help()). `busy` says that some thread is running one of the
// lane's ops; whoever sets it runs the queue's front, so the order never changes.
//
// Waiter mode: once a waiter has run an op itself, the lane expects the caller to wait for the next ones
// too (post, wait, post, wait: the synchronous pattern) and post() no longer wakes the lane's thread:
// the caller runs the op in its wait() with no hand-off in either direction. The lane's thread then
// sleeps until the queue's Watcher finds an op left unclaimed for Config::unclaimed_after (a caller that
// did not wait) and wakes it to start the op, which ends the mode; kWaiterIdle without ops ends it too.
// A caller that posts an op while its previous one on the lane is still queued unclaimed is not waiting
// either: post() ends the mode and wakes the lane's thread at once.
//
// One watcher per queue, not a timed wait per lane: gloo's two lanes woke twice as often, and each
// wake-up costs a context switch on a core that a rank's op is using. The watcher looks every
// unclaimed_after while it finds ops queued, and doubles the gap after each look that finds none, up to
// Config::look_gap_max: a post-and-wait loop (nothing ever queued at a look) then pays a wake-up every
// few milliseconds rather than every one. Each wake-up may preempt a waiter running an op: a 16 MiB
// allgather loop on mpi, 2 ranks, went from ~0.24 to ~0.09 context switches per op in rank 0 and from
// 1.030x to 1.022x raw (alltoall 1.039x to 1.032x; docs/PERFORMANCE.md, "Large copies in pieces").
struct OpQueue::Watcher {
  Watcher(std::chrono::microseconds unclaimed, std::chrono::microseconds gap_max)
      : unclaimed_after(unclaimed), look_gap_max(gap_max) {}

  const std::chrono::microseconds unclaimed_after;
  const std::chrono::microseconds look_gap_max;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;     // GUARDED_BY(mu)
  bool entered = false;  // GUARDED_BY(mu): a lane entered waiter mode since the last look
  std::thread thread;

  // A lane entered waiter mode: look every unclaimed_after from now on. Called with the lane's lock held
  // (lock order: Lane::mu, then Watcher::mu; the watcher never holds both).
  void wake() {
    {
      std::lock_guard<std::mutex> lock(mu);
      entered = true;
    }
    cv.notify_one();
  }
};

struct OpQueue::Lane final : Work::Helper {
  struct Task {
    Clock::time_point queued_at;
    Clock::time_point deadline;  // the op's own deadline: a waiter runs it only if it ends within the wait
    std::function<void()> run;
  };
  explicit Lane(std::shared_ptr<Watcher> w) : watcher(std::move(w)) {}

  // Shared: a Work may call help() after the group is gone (it then finds the queue empty).
  const std::shared_ptr<Watcher> watcher;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> queue;
  bool stop = false;
  bool busy = false;
  // Written under mu; the watcher reads it without mu to decide whether to keep looking.
  std::atomic<bool> waiter_mode{false};
  Clock::time_point last_queued{};
  std::thread thread;
  std::atomic<size_t> queued{0};           // queue.size(), readable without the lock while spinning
  std::atomic<bool> last_was_small{true};  // whether the last op was small enough to spin after
  // The op running now (0: none) and when the monitor should publish it.
  std::atomic<uint64_t> running_seq{0};
  std::atomic<Clock::rep> publish_at{0};
  std::atomic<Clock::rep> started_at{0};

  // The watcher's look at `now`: wakes the lane's thread for an op left unclaimed for unclaimed_after, and
  // ends waiter mode after kWaiterIdle without ops. Returns whether an op is queued in waiter mode (the
  // watcher then looks again soon).
  bool look(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu);
    if (!waiter_mode.load(std::memory_order_relaxed)) return false;
    if (busy) return !queue.empty();
    if (!queue.empty()) {
      if (now >= queue.front().queued_at + watcher->unclaimed_after) cv.notify_one();  // lane_loop starts it
      return true;
    }
    if (now - last_queued > kWaiterIdle) waiter_mode.store(false);
    return false;
  }

  void help(const Work& work, Clock::time_point limit) override {
    std::unique_lock<std::mutex> lock(mu);
    bool ran = false;
    while (!work.is_completed() && !busy && !queue.empty() && queue.front().deadline <= limit) {
      {
        Task task = std::move(queue.front());
        queue.pop_front();
        queued.fetch_sub(1, std::memory_order_relaxed);
        busy = true;
        lock.unlock();
        const bool outer = t_running_for_waiter;  // a waiter may wait (barrier) inside an op it runs
        t_running_for_waiter = true;
        task.run();  // run_op: never throws
        t_running_for_waiter = outer;
      }  // the op's closure (inputs, Work) is released outside the lock
      lock.lock();
      busy = false;
      ran = true;
    }
    if (ran && !stop && !waiter_mode.load(std::memory_order_relaxed)) {
      waiter_mode.store(true);
      watcher->wake();
    }
    // At shutdown the lane's thread waits for the lane to be free. Notified under the lock: once it is
    // released, the group (and this lane) may be destroyed.
    if (ran && stop) cv.notify_all();
  }
};

OpQueue::OpQueue(std::string group, Config config)
    : group_(std::move(group)), watcher_(std::make_shared<Watcher>(config.unclaimed_after, config.look_gap_max)) {
  BRAID_CHECK_ARG(config.lanes >= 1 && config.lanes <= 64, "process group '{}': lanes must be in [1, 64], got {}",
                  group_, config.lanes);
  BRAID_CHECK_ARG(config.unclaimed_after.count() > 0 && config.look_gap_max >= config.unclaimed_after,
                  "process group '{}': waiter mode needs 0 < unclaimed_after <= look_gap_max, got {} and {} us",
                  group_, config.unclaimed_after.count(), config.look_gap_max.count());
  for (int i = 0; i < config.lanes; ++i) lanes_.push_back(std::make_shared<Lane>(watcher_));
  for (auto& lane : lanes_) {
    Lane* l = lane.get();
    l->thread = std::thread([this, l] { lane_loop(*l); });
  }
  watcher_->thread = std::thread([this] { watch_loop(); });
}

OpQueue::~OpQueue() { shutdown(); }

bool OpQueue::on_waiting_thread() { return t_running_for_waiter; }

void OpQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  for (auto& lane : lanes_) {
    {
      std::lock_guard<std::mutex> lock(lane->mu);
      lane->stop = true;
    }
    lane->cv.notify_all();
  }
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  // After the lanes: at stop, lanes run everything at once and no lane enters waiter mode any more.
  {
    std::lock_guard<std::mutex> lock(watcher_->mu);
    watcher_->stop = true;
  }
  watcher_->cv.notify_all();
  if (watcher_->thread.joinable()) watcher_->thread.join();
}

void OpQueue::post(int lane_index, const Deadline& deadline, bool small, const std::shared_ptr<Work>& work,
                   std::function<void()> run) {
  if (small) work->set_wait_spin(kWaitSpin);
  const auto& lane_ptr = lanes_[static_cast<size_t>(lane_index)];
  Lane& lane = *lane_ptr;
  work->set_helper(lane_ptr);
  const auto queued_at = Clock::now();
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(lane.mu);
    // The caller posts again while its last op here is still queued unclaimed: it is not waiting.
    if (lane.waiter_mode.load(std::memory_order_relaxed) && !lane.busy && !lane.queue.empty()) {
      lane.waiter_mode.store(false);
    }
    lane.last_queued = queued_at;
    lane.queue.push_back({queued_at, deadline.at(), std::move(run)});
    lane.queued.fetch_add(1, std::memory_order_release);
    notify = !lane.waiter_mode;
  }
  if (notify) lane.cv.notify_one();
}

void OpQueue::op_started(int lane_index, uint64_t seq, Clock::time_point started, Clock::time_point publish_at,
                         bool small) {
  Lane& lane = *lanes_[static_cast<size_t>(lane_index)];
  lane.publish_at.store(publish_at.time_since_epoch().count());
  lane.started_at.store(started.time_since_epoch().count());
  lane.running_seq.store(seq);
  lane.last_was_small.store(small);
}

void OpQueue::op_ended(int lane_index) { lanes_[static_cast<size_t>(lane_index)]->running_seq.store(0); }

uint64_t OpQueue::longest_waiting(Clock::time_point now) const {
  uint64_t waiting = 0;
  const auto at = now.time_since_epoch().count();
  for (const auto& lane : lanes_) {
    const uint64_t seq = lane->running_seq.load();
    if (seq != 0 && at >= lane->publish_at.load()) waiting = std::max(waiting, seq);
  }
  return waiting;
}

std::vector<OpQueue::Running> OpQueue::running() const {
  std::vector<Running> out;
  for (const auto& lane : lanes_) {
    // started_at is stored before running_seq (op_started): a seq read here has its start time in place,
    // or a later one's (the watchdog then sees the newer op as younger, which errs on the side of silence).
    const uint64_t seq = lane->running_seq.load();
    if (seq != 0) out.push_back({seq, Clock::time_point(Clock::duration(lane->started_at.load()))});
  }
  return out;
}

namespace {

// The watcher only looks for unclaimed ops. Under the default policy each of its wake-ups preempts the
// waiter that is running an op on the same core (a sleeper's wake-up wins): measured on 2 ranks on 2
// cores with the look in each lane's thread, about one preemption per 1 ms, and 1 MiB allreduces 3-11%
// slower than the raw call. SCHED_BATCH threads never preempt on wake-up; they run at the next
// scheduling point (at once on an idle core).
void set_batch_policy() {
  sched_param param{};
  param.sched_priority = 0;
  (void)::sched_setscheduler(0, SCHED_BATCH, &param);  // best effort: a hint
}

}  // namespace

void OpQueue::lane_loop(Lane& lane) {
  std::unique_lock<std::mutex> lock(lane.mu);
  for (;;) {
    if (!lane.busy && !lane.queue.empty()) {
      // In waiter mode the front op is left to a waiter for unclaimed_after (then the watcher wakes this
      // thread); at shutdown everything runs now.
      if (lane.waiter_mode.load(std::memory_order_relaxed) && !lane.stop &&
          Clock::now() < lane.queue.front().queued_at + watcher_->unclaimed_after) {
        lane.cv.wait(lock);
        continue;
      }
      lane.waiter_mode.store(false);
      {
        Lane::Task task = std::move(lane.queue.front());
        lane.queue.pop_front();
        lane.queued.fetch_sub(1, std::memory_order_relaxed);
        lane.busy = true;
        lock.unlock();
        task.run();
      }  // the op's closure is released outside the lock
      lock.lock();
      lane.busy = false;
      if (lane.queue.empty() && lane.last_was_small.load()) {
        // A caller that waits for one op and issues the next (when it did not run the op itself) posts
        // within a few microseconds: looking for it briefly before sleeping saves a thread wake-up.
        lock.unlock();
        const auto spin_until = Clock::now() + kLaneSpin;
        while (lane.queued.load(std::memory_order_acquire) == 0 && Clock::now() < spin_until) ::sched_yield();
        lock.lock();
      }
      continue;
    }
    if (lane.stop && !lane.busy && lane.queue.empty()) return;  // stop requested and drained
    // Nothing to run now. post() wakes this thread outside waiter mode, the watcher within it, a
    // waiter when it leaves the lane at shutdown.
    lane.cv.wait(lock);
  }
}

void OpQueue::watch_loop() {
  set_batch_policy();
  std::unique_lock<std::mutex> lock(watcher_->mu);
  auto gap = watcher_->unclaimed_after;
  while (!watcher_->stop) {
    const bool looking = std::any_of(lanes_.begin(), lanes_.end(), [](const std::shared_ptr<Lane>& l) {
      return l->waiter_mode.load();
    });
    if (!looking) {
      watcher_->cv.wait(lock);  // Watcher::wake() when a lane enters waiter mode
      continue;
    }
    if (watcher_->entered) {
      watcher_->entered = false;
      gap = watcher_->unclaimed_after;
    }
    watcher_->cv.wait_for(lock, gap);
    if (watcher_->stop) break;
    lock.unlock();
    const auto now = Clock::now();
    bool queued = false;
    for (const auto& lane : lanes_) queued = lane->look(now) || queued;
    lock.lock();
    gap = queued ? watcher_->unclaimed_after : std::min(2 * gap, watcher_->look_gap_max);
  }
}

}  // namespace braid::collectives
