// RpcAgent::shutdown. Graceful shutdown is a three-step agreement through the store, so that no worker
// closes while another still needs it:
//   1. "calls":  wait until this worker's own calls are answered, then wait for every worker to do so;
//                no application call is in flight anywhere afterwards.
//   2. "rrefs":  release every user RRef still alive here (as if destroyed), wait until the deletes, fork
//                requests and child accepts this worker started are answered, then wait for everyone;
//                every owner has heard from every user afterwards, so what it still owns has leaked.
//   3. worker 0 (usually the store's host) waits until every worker is done with the store;
//   4. close the transport, the thread pool and the timer.
// A worker that does not arrive within join_timeout makes the barrier fail with TimeoutError naming it;
// the agent still closes. shutdown(false) skips 1 and 2.
#include <fmt/format.h>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/agent.h"

namespace braid::rpc {

namespace {
using Clock = std::chrono::steady_clock;
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
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  try {
    store_->wait({base + "/done"}, std::max(left, Millis(1)));
  } catch (const TimeoutError&) {
    std::vector<std::string> missing;
    for (const auto& w : workers_) {
      if (!store_->check({base + "/arrived/" + std::to_string(w.id)})) missing.push_back(w.name);
    }
    BRAID_THROW(TimeoutError,
                "rpc shutdown of '{}': the '{}' barrier timed out after {} ms; workers that did not arrive: {}",
                self_.name, phase, options_.join_timeout.count(), fmt::join(missing, ", "));
  }
}

void RpcAgent::leave_store(Clock::time_point deadline) {
  // The store is often served by worker 0's process (env://, mpirun). Worker 0 leaves last: it waits
  // until every worker is past the barriers and done with the store, so that no one's wait or add runs
  // into a server that has exited. What the others do here is best effort: they need nothing more.
  const std::string count = "shutdown/exit/count", done = "shutdown/exit/done";
  try {
    if (store_->add(count, 1) == world_size_) store_->set(done, "1");
  } catch (const std::exception& e) {
    if (self_.id == 0) throw;
    logging::get("braid.rpc")->debug("{}: leaving the store after shutdown: {}", self_.name, e.what());
    return;
  }
  if (self_.id == 0) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    store_->wait({done}, std::max(left, Millis(1)));
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
  if (graceful) {
    const auto deadline = Clock::now() + options_.join_timeout;
    try {
      wait_drained("calls", deadline);
      store_barrier("calls", deadline);
      rrefs_->release_all_users();
      wait_drained("rrefs", deadline);
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
