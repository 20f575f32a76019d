#include "dist_autograd/release.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/check.h"
#include "base/logging.h"
#include "dist_autograd/context_state.h"
#include "dist_autograd/send_recv.h"
#include "rpc/api.h"

namespace braid::dist_autograd {

Future<rpc::Value> release_everywhere(int64_t context_id, int from) {
  auto state = ContextTable::instance().erase(context_id);
  if (!state || !rpc::is_initialized()) {
    Future<rpc::Value> none("release of an absent context");
    none.set_value(rpc::Value());
    return none;
  }
  const std::vector<int> known = state->known_workers();
  state.reset();  // the graph (and its saved tensors) goes now, not when the last reply arrives
  rpc::RpcAgent& agent = rpc::current_agent();
  const int self = agent.self().id;
  std::vector<Future<rpc::Value>> asked;
  InternalCallScope internal;
  for (int w : known) {
    if (w == self || w == from) continue;
    asked.push_back(agent.call_async(agent.worker(w), kReleaseFunction,
                                     {rpc::Value(context_id), rpc::Value(int64_t{self})}));
  }
  return when_all(asked, fmt::format("release of distributed autograd context {}", context_id));
}

PendingReleases& PendingReleases::instance() {
  static PendingReleases pending;
  return pending;
}

void PendingReleases::track(int64_t context_id, Future<rpc::Value> released, std::chrono::milliseconds backpressure) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (pending_.size() >= kMaxPending &&
        !cv_.wait_for(lock, backpressure, [&] { return pending_.size() < kMaxPending; })) {
      logging::get("braid.dist_autograd")
          ->warn("{} releases of distributed autograd contexts still unconfirmed after {} ms; context {} adds one",
                 pending_.size(), backpressure.count(), context_id);
    }
    pending_.emplace(context_id, std::chrono::steady_clock::now());
  }
  // Runs at once when the release is complete already (nothing to tell anyone).
  released.add_callback([this, context_id](const Future<rpc::Value>& f) { finished(context_id, f); });
}

void PendingReleases::finished(int64_t context_id, const Future<rpc::Value>& released) {
  if (released.has_error()) {
    try {
      std::rethrow_exception(released.error());
    } catch (const std::exception& e) {
      logging::get("braid.dist_autograd")
          ->warn("releasing distributed autograd context {} on the other workers failed: {}", context_id, e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(context_id);
  }
  cv_.notify_all();
}

void PendingReleases::wait_all(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  // Releases tracked after this call started are not waited for: a busy loop elsewhere cannot hold it.
  const auto started = std::chrono::steady_clock::now();
  const auto older_left = [&] {
    size_t n = 0;
    for (const auto& [id, at] : pending_) n += at <= started ? 1 : 0;
    return n;
  };
  if (cv_.wait_for(lock, timeout, [&] { return older_left() == 0; })) return;
  std::vector<int64_t> left;
  for (const auto& [id, at] : pending_) {
    if (at <= started) left.push_back(id);
  }
  BRAID_THROW(TimeoutError,
              "dist_autograd.wait_for_releases: {} context release(s) not confirmed by the other workers after {} ms "
              "(contexts {})", left.size(), timeout.count(), fmt::join(left, ", "));
}

size_t PendingReleases::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

}  // namespace braid::dist_autograd
