// HealthMonitor (health_monitor.h): sticky errors, the progress publisher behind the missing-ranks report,
// and BRAID_DEBUG=DETAIL fingerprints.
#include "collectives/queue/health_monitor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/env.h"
#include "base/logging.h"

namespace braid::collectives {

namespace {

// How often the publisher looks for an op that has waited past its publish time (op_queue.h, op_started).
constexpr Millis kPublishTick{50};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool detail_mode_from_env() {
  const auto v = env::get("BRAID_DEBUG");
  return v && (*v == "DETAIL" || *v == "detail");
}

}  // namespace

HealthMonitor::HealthMonitor(GroupShape shape, std::string backend, std::shared_ptr<store::Store> store,
                             const OpQueue& queue)
    : shape_(std::move(shape)),
      backend_(std::move(backend)),
      store_(std::move(store)),
      queue_(queue),
      detail_(detail_mode_from_env()) {
  if (store_) publisher_ = std::thread([this] { publish_loop(); });
}

HealthMonitor::~HealthMonitor() { stop(); }

void HealthMonitor::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
}

std::string HealthMonitor::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void HealthMonitor::throw_if_broken(const char* op) const {
  if (!is_broken()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty()) {
    BRAID_THROW(CommError, "{} on group '{}' (rank {}/{}, {}): the group is broken since an earlier op failed; "
                "create a new group. First failure: {}", op, shape_.name, shape_.rank, shape_.size, backend_, broken_);
  }
}

void HealthMonitor::record_failure(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = what;
    is_broken_.store(true, std::memory_order_release);
  }
  logging::get("braid.collectives")->error("{}", what);
}

std::string HealthMonitor::progress_key(int rank) const {
  return fmt::format("braid/pg/{}/progress/{}", shape_.name, rank);
}

std::exception_ptr HealthMonitor::enrich_error(const OpContext& ctx, std::exception_ptr error, double elapsed) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(TimeoutError(
        fmt::format("{}: timed out after {:.0f} ms{} (engine: {})", ctx.what, elapsed, missing_ranks_report(ctx.seq),
                    e.what())));
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(ctx.what) != std::string_view::npos) return error;
    return std::make_exception_ptr(CommError(fmt::format("{}: failed after {:.0f} ms: {}", ctx.what, elapsed, e.what())));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(CommError(fmt::format("{}: failed after {:.0f} ms: {}", ctx.what, elapsed, e.what())));
  } catch (...) {
    return std::make_exception_ptr(CommError(fmt::format("{}: failed after {:.0f} ms with a non-standard exception",
                                                         ctx.what, elapsed)));
  }
}

// ---- Who never joined ----

void HealthMonitor::publish_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, kPublishTick);
    if (stopping_) break;
    const uint64_t waiting = queue_.longest_waiting(Clock::now());
    if (waiting <= published_seq_) continue;
    published_seq_ = waiting;
    lock.unlock();
    try {
      store_->set(progress_key(shape_.rank), store::to_bytes(std::to_string(waiting)));
    } catch (const std::exception& e) {
      logging::get("braid.collectives")->warn("group '{}': could not publish progress: {}", shape_.name, e.what());
    }
    lock.lock();
  }
}

std::string HealthMonitor::missing_ranks_report(uint64_t seq) {
  if (!store_) return "; the group has no store, so the ranks that did not join are unknown";
  std::vector<int> never;
  std::vector<std::string> behind;
  try {
    for (int r = 0; r < shape_.size; ++r) {
      if (r == shape_.rank) continue;
      const std::string key = progress_key(r);
      if (!store_->check({key})) {
        never.push_back(r);
        continue;
      }
      const uint64_t at = std::stoull(store::to_string(store_->get(key, Millis(1000))));
      if (at < seq) behind.push_back(fmt::format("{} (last waited in #{})", r, at));
    }
  } catch (const std::exception& e) {
    return fmt::format("; could not read the other ranks' progress: {}", e.what());
  }
  if (never.empty() && behind.empty()) return "; every rank entered this op (a peer may have failed inside it)";
  std::vector<std::string> parts;
  for (int r : never) parts.push_back(std::to_string(r));
  parts.insert(parts.end(), behind.begin(), behind.end());
  return fmt::format("; ranks that never joined it: {}", fmt::join(parts, ", "));
}

// ---- BRAID_DEBUG=DETAIL ----

void HealthMonitor::check_fingerprint(const OpContext& ctx, const std::string& signature, Engine& engine) {
  const auto mine = static_cast<int64_t>(fnv1a(signature));
  Tensor local = Tensor::empty({1}, TensorOptions(DType::Int64, Device::cpu()));
  local.data<int64_t>()[0] = mine;
  Tensor all = Tensor::empty({shape_.size}, TensorOptions(DType::Int64, Device::cpu()));
  if (engine.device().is_cuda()) {
    Tensor l = local.to(engine.device());
    Tensor a = all.to(engine.device());
    (void)engine.allgather(l, a, ctx);
    all = a.to(Device::cpu());
  } else {
    (void)engine.allgather(local, all, ctx);
  }
  const auto* hashes = all.data<int64_t>();
  if (std::all_of(hashes, hashes + shape_.size, [&](int64_t h) { return h == mine; })) return;
  if (!store_) {
    BRAID_THROW(CommError, "{}: BRAID_DEBUG=DETAIL: the ranks called different collectives or passed different "
                "shapes/dtypes (this rank: {})", ctx.what, signature);
  }
  const std::string prefix = fmt::format("braid/pg/{}/detail/{}/", shape_.name, ctx.seq);
  store_->set(prefix + std::to_string(shape_.rank), store::to_bytes(signature));
  std::vector<std::string> lines;
  for (int r = 0; r < shape_.size; ++r) {
    if (hashes[r] == mine) continue;
    std::string theirs = "(did not say)";
    try {
      theirs = store::to_string(store_->get(prefix + std::to_string(r), ctx.deadline.remaining()));
    } catch (const std::exception&) {
    }
    lines.push_back(fmt::format("rank {}: {}", r, theirs));
  }
  BRAID_THROW(CommError, "{}: BRAID_DEBUG=DETAIL: ranks disagree on this collective. This rank ({}): {}; differing: {}",
              ctx.what, shape_.rank, signature, fmt::join(lines, "; "));
}

}  // namespace braid::collectives
