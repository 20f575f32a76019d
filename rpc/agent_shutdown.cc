// RpcAgent::shutdown. Graceful shutdown is a three-step agreement through the store, so that no worker
// closes while another still needs it:
//   1. "calls":  wait until this worker's own calls are answered, then wait for every worker to do so;
//                no application call is in flight anywhere afterwards.
//   2. "rrefs":  release every user RRef still alive here (as if destroyed), wait until the deletes, fork
//                requests and child accepts this worker started are answered, then wait for everyone;
//                every owner has heard from every user afterwards, so what it still owns has leaked.
//   3. worker 0 (usually the store's host) waits until every worker is done with the store;
//   4. close the transport, the thread pool and the timer.
// A worker that does not arrive within shutdown_timeout (join_timeout unless set) makes the barrier fail
// with TimeoutError naming it; the agent still closes. A barrier that misses a worker known dead (its
// connection broke: dead_peers(); or the caller saw its process end: RpcAgentOptions::peer_ended) fails at
// once with CommError naming it: it will never arrive. The missing workers are pinged once a barrier has
// waited kProbeAfter, so that a dead worker this one never talked to is found out too (its connect fails
// within the transport's connect retries).
// shutdown(false) skips 1 and 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/check.h"
#include "base/logging.h"
#include "base/quiet_timeouts.h"
#include "rpc/agent.h"

namespace braid::rpc {

namespace {
using Clock = std::chrono::steady_clock;
// The store is asked this often whether a barrier is complete, and the dead peers are looked at between.
// The first slices are short: a peer that died as the job ended is often known dead already, and a
// launcher (mpirun) ends the job's other processes within moments of a death.
constexpr Millis kFirstBarrierSlice{10};
constexpr Millis kBarrierSlice{100};
// A barrier still incomplete after this long pings the workers it misses.
constexpr Millis kProbeAfter{500};
}  // namespace

void RpcAgent::wait_for_peers(const std::vector<std::string>& keys, Clock::time_point deadline, const std::string& what,
                              const std::function<std::vector<int>()>& missing) {
  const auto start = Clock::now();
  bool probed = false;
  Millis slice = kFirstBarrierSlice;
  for (;;) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    try {
      // A slice that times out is the normal case while peers are still working: no log backtrace for it.
      logging::QuietTimeouts quiet;
      store_->wait(keys, std::clamp(left, Millis(1), slice));
      return;
    } catch (const TimeoutError&) {
      if (Clock::now() >= deadline) {
        logging::dump_backtrace();
        throw;
      }
    }
    slice = std::min(2 * slice, kBarrierSlice);
    const std::vector<int> absent = missing();
    const std::map<int, std::string> dead = dead_peers();
    // Every missing worker is asked about, not only up to the first dead one: the job runtime's answer also
    // keeps its record of stopped peers fresh (runtime/run/local_peers.h). One dead worker is enough to
    // give up: the barrier can never complete; the live ones it misses are named beside it.
    std::vector<std::string> named, waiting;
    for (int id : absent) {
      std::string why;
      if (auto it = dead.find(id); it != dead.end()) {
        why = it->second;
      } else if (options_.peer_ended && id != self_.id) {
        why = options_.peer_ended(id);
      }
      const std::string& name = workers_[static_cast<size_t>(id)].name;
      if (why.empty()) {
        waiting.push_back(fmt::format("'{}'", name));
      } else {
        named.push_back(fmt::format("'{}' ({})", name, why));
      }
    }
    if (!named.empty()) {
      const std::string also = waiting.empty() ? "" : fmt::format("; not arrived either: {}", fmt::join(waiting, ", "));
      logging::get("braid.rpc")->error("rpc shutdown of '{}' ({}): not waiting for worker(s) known dead: {}{}",
                                       self_.name, what, fmt::join(named, ", "), also);
      BRAID_THROW(CommError, "rpc shutdown of '{}': {} cannot complete: worker(s) known dead: {}{}", self_.name, what,
                  fmt::join(named, ", "), also);
    }
    if (!probed && Clock::now() - start >= kProbeAfter) {
      probed = true;
      for (int id : absent) {
        if (id == self_.id || dead.count(id) > 0) continue;
        // The answer does not matter: a dead peer fails the connect, and on_peer_failure marks it dead.
        send_request(id, MessageType::kPing, {}, {}, Millis(2000), "shutdown liveness probe",
                     [](Message*, std::exception_ptr) {});
      }
    }
  }
}

void RpcAgent::wait_drained(const char* phase, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Phase "calls" waits for this worker's own calls only: others may still be calling it.
    const bool rrefs_phase = std::string_view(phase) == "rrefs";
    const bool rrefs_settled = !rrefs_phase || rrefs_->quiescent();
    if (pending_.empty() && (!rrefs_phase || serving_ == 0) && rrefs_settled) return;
    if (Clock::now() >= deadline) {
      std::vector<std::string> left;
      for (const auto& [id, p] : pending_) left.push_back(fmt::format("#{} {}", id, p.what));
      BRAID_THROW(TimeoutError, "rpc shutdown of '{}' ({}): still waiting for {} call(s) [{}], {} being served{}",
                  self_.name, phase, pending_.size(), fmt::join(left, "; "), serving_,
                  rrefs_settled ? "" : ", and RRef forks not yet confirmed");
    }
    // RRef confirmations complete without touching pending_'s condition: poll them in short steps.
    drained_cv_.wait_until(lock, std::min(deadline, Clock::now() + Millis(5)));
  }
}

void RpcAgent::store_barrier(const std::string& phase, Clock::time_point deadline) {
  const std::string base = "shutdown/" + phase;
  store_->set(base + "/arrived/" + std::to_string(self_.id), self_.name);
  if (store_->add(base + "/count", 1) == world_size_) store_->set(base + "/done", "1");
  const auto missing_ids = [&] {
    std::vector<int> ids;
    for (const auto& w : workers_) {
      if (!store_->check({base + "/arrived/" + std::to_string(w.id)})) ids.push_back(w.id);
    }
    return ids;
  };
  try {
    wait_for_peers({base + "/done"}, deadline, fmt::format("the '{}' barrier", phase), missing_ids);
  } catch (const TimeoutError&) {
    std::vector<std::string> missing;
    for (int id : missing_ids()) missing.push_back(workers_[static_cast<size_t>(id)].name);
    BRAID_THROW(TimeoutError,
                "rpc shutdown of '{}': the '{}' barrier timed out after {} ms; workers that did not arrive: {}",
                self_.name, phase, shutdown_timeout().count(), fmt::join(missing, ", "));
  }
}

void RpcAgent::leave_store(Clock::time_point deadline) {
  // The store is often served by worker 0's process (env://, mpirun). Worker 0 leaves last: it waits
  // until every worker is past the barriers and done with the store, so that no one's wait or add runs
  // into a server that has exited. What the others do here is best effort: they need nothing more.
  const std::string count = "shutdown/exit/count", done = "shutdown/exit/done";
  try {
    store_->set("shutdown/exit/left/" + std::to_string(self_.id), self_.name);
    if (store_->add(count, 1) == world_size_) store_->set(done, "1");
  } catch (const std::exception& e) {
    if (self_.id == 0) throw;
    logging::get("braid.rpc")->debug("{}: leaving the store after shutdown: {}", self_.name, e.what());
    return;
  }
  if (self_.id == 0) {
    wait_for_peers({done}, deadline, "leaving the store", [this] {
      std::vector<int> ids;
      for (const auto& w : workers_) {
        if (!store_->check({"shutdown/exit/left/" + std::to_string(w.id)})) ids.push_back(w.id);
      }
      return ids;
    });
  }
}

void RpcAgent::shutdown(bool graceful) {
  BRAID_CHECK_ARG(!pool_->on_pool_thread(), "rpc shutdown: called from an RPC worker thread of '{}'", self_.name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kRunning) return;  // shut down already (or shutting down on another thread)
    state_ = State::kDraining;
  }
  std::exception_ptr failure;
  if (!graceful && options_.on_peers_may_leave) options_.on_peers_may_leave();
  if (graceful) {
    const auto deadline = Clock::now() + shutdown_timeout();
    try {
      wait_drained("calls", deadline);
      store_barrier("calls", deadline);
      rrefs_->release_all_users();
      wait_drained("rrefs", deadline);
      if (options_.on_peers_may_leave) options_.on_peers_may_leave();
      store_barrier("rrefs", deadline);
      leave_store(deadline);
      leaked_rrefs_ = rrefs_->counts().owned;
      if (leaked_rrefs_ > 0) {
        logging::get("braid.rpc")->warn("{}: {} RRef value(s) still referenced by users at shutdown (leaked)",
                                        self_.name, leaked_rrefs_);
      }
    } catch (...) {
      failure = std::current_exception();
    }
  }
  std::vector<std::pair<std::string, ReplyHandler>> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kClosing;
    for (auto& [id, p] : pending_) failed.emplace_back(std::move(p.what), std::move(p.on_reply));
    pending_.clear();
    deadlines_.clear();
  }
  for (auto& [what, handler] : failed) {
    handler(nullptr, std::make_exception_ptr(
                         CommError(fmt::format("{}: the RPC agent of worker '{}' shut down", what, self_.name))));
  }
  transport_->shutdown();
  pool_->stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kStopped;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  rrefs_->detach_agent();
  rrefs_->release_all_users();  // nothing can be sent any more: users still alive are just forgotten
  if (failure) std::rethrow_exception(failure);
}

}  // namespace braid::rpc
