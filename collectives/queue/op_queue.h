// OpQueue: the lanes a group's ops run on, in issue order, each bounded by its deadline.
//
// An op is queued on lane `seq % lanes()` and run by the lane's thread or, when the lane is idle, by a
// thread that waits for one of its ops (Work::wait runs it itself: no thread hand-off for a caller that
// posts and waits). Several lanes (the gloo `threads` option) let ops run concurrently; every rank puts op
// n on the same lane, so an engine can give each lane its own context or communicator.
//
// Waiter mode: once a waiter has run an op itself, the lane expects the caller to wait for the next ones
// too (post, wait, post, wait: the synchronous pattern) and post() no longer wakes the lane's thread. The
// lane's thread then sleeps until the queue's watcher finds an op left unclaimed for
// Config::unclaimed_after (a caller that did not wait) and wakes it to start the op, which ends the mode.
//
// The queue also tracks which op each lane is running and since when, for the health monitor's report of
// the ranks that never joined an op (health_monitor.h).
//
// Thread-safety: post() may be called from any thread; shutdown() from the owner's, once no op is posted.
// Threads: one per lane and one watcher, all joined by shutdown() (docs/THREADING.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "collectives/core/work.h"

namespace braid::collectives {

class OpQueue {
 public:
  struct Config {
    int lanes = 1;
    // An op nobody waits for is started by the lane's thread once it has sat unclaimed this long and the
    // watcher looks; the watcher looks every unclaimed_after while it finds ops queued, and backs off to one
    // look per look_gap_max while it finds none. An op posted after a stretch of post-and-wait may so wait
    // up to look_gap_max, unless the caller posts another on its lane or waits for it first (either starts
    // it at once).
    std::chrono::microseconds unclaimed_after{1000};
    std::chrono::microseconds look_gap_max{8000};
  };

  // `group` names the owner in messages.
  OpQueue(std::string group, Config config);
  // Calls shutdown().
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  int lanes() const { return static_cast<int>(lanes_.size()); }

  // Queues `run` on `lane` behind every op posted there before; `work` (which `run` completes) gets the
  // lane as its Work::Helper, so that waiting for it runs the lane's ops on the waiting thread. `small`
  // ops (that end within microseconds) are waited for by spinning briefly first.
  void post(int lane, const Deadline& deadline, bool small, const std::shared_ptr<Work>& work,
            std::function<void()> run);

  // Stops the lanes after they ran every queued op (each completes or times out), then joins every thread.
  // Idempotent.
  void shutdown();

  // Called by the op itself, on whichever thread runs it: op `seq` runs on `lane` since `started`, and counts
  // as waiting once `publish_at` passed (op_ended: it no longer runs).
  void op_started(int lane, uint64_t seq, Clock::time_point started, Clock::time_point publish_at, bool small);
  void op_ended(int lane);
  // The largest sequence number among the ops that have run past their publish_at, 0 when none has.
  uint64_t longest_waiting(Clock::time_point now) const;
  // The ops running now, one per busy lane, with when they started (the stall watchdog reads them).
  struct Running {
    uint64_t seq;
    Clock::time_point started;
  };
  std::vector<Running> running() const;

  // Whether the calling thread runs the op for a thread blocked in Work::wait (the waiter itself), as
  // opposed to a lane's thread, which may share a core with the caller's own work. Engines may then keep
  // the core while they wait for the network instead of yielding it.
  static bool on_waiting_thread();

 private:
  struct Lane;
  struct Watcher;

  void lane_loop(Lane& lane);
  void watch_loop();

  const std::string group_;
  std::shared_ptr<Watcher> watcher_;          // one thread for every lane's waiter-mode looks
  std::vector<std::shared_ptr<Lane>> lanes_;  // shared with the Works they run (Work::Helper)
  std::mutex mu_;
  bool stopped_ = false;  // GUARDED_BY(mu_)
};

}  // namespace braid::collectives
