// HealthMonitor (health_monitor.h): sticky errors, the progress publisher behind the missing-ranks report,
// and BRAID_DEBUG=DETAIL fingerprints.
#include "collectives/queue/health_monitor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/check.h"
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
                             const OpQueue& queue, Config config)
    : shape_(std::move(shape)),
      backend_(std::move(backend)),
      store_(std::move(store)),
      queue_(queue),
      detail_(config.detail ? *config.detail : detail_mode_from_env()),
      config_(std::move(config)) {
  if (store_ || config_.stall_warn.count() > 0) monitor_ = std::thread([this] { monitor_loop(); });
}

Millis HealthMonitor::stall_warn_from_env(Millis fallback) {
  const auto v = env::get("BRAID_STALL_WARN_S");
  if (!v) return fallback;
  double seconds = -1;
  size_t used = 0;
  try {
    seconds = std::stod(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  BRAID_CHECK_ARG(used == v->size() && seconds >= 0 && seconds <= 7 * 24 * 3600.0,
                  "BRAID_STALL_WARN_S must be a number of seconds in [0, 604800] (0: no stall watchdog), got '{}'", *v);
  return Millis(static_cast<int64_t>(seconds * 1000));
}

HealthMonitor::~HealthMonitor() { stop(); }

void HealthMonitor::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
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

// ---- The monitor thread: who never joined, stalls, SIGUSR2 ----

void HealthMonitor::monitor_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, kPublishTick);
    if (stopping_) break;
    // Unlocked: the store calls below may block on the network, and stop() must be able to flag the end.
    lock.unlock();
    const auto now = Clock::now();
    if (store_) publish(now);
    if (config_.stall_warn.count() > 0) check_stalls(now);
    if (trace::take_signal_request()) (void)trace::dump_all("SIGUSR2");
    lock.lock();
  }
}

void HealthMonitor::publish(Clock::time_point now) {
  const uint64_t waiting = queue_.longest_waiting(now);
  if (waiting <= published_seq_) return;
  published_seq_ = waiting;
  try {
    store_->set(progress_key(shape_.rank), store::to_bytes(std::to_string(waiting)));
  } catch (const std::exception& e) {
    logging::get("braid.collectives")->warn("group '{}': could not publish progress: {}", shape_.name, e.what());
  }
}

void HealthMonitor::check_stalls(Clock::time_point now) {
  for (const OpQueue::Running& op : queue_.running()) {
    if (op.seq <= warned_seq_ || now - op.started < config_.stall_warn) continue;
    warned_seq_ = op.seq;
    const Missing missing = find_missing(op.seq);
    const double waited = std::chrono::duration<double>(now - op.started).count();
    StallNote note{op.seq, "", waited, missing.never, missing.behind, missing.unknown};
    if (config_.recorder) {
      for (const TraceEntry& e : config_.recorder->entries()) {
        if (e.seq == op.seq) note.op = e.op;
      }
      config_.recorder->note_stall(note);
    }
    const std::string op_name = note.op.empty() ? "op" : note.op;
    const std::string path = trace::dump_all("stall");
    logging::get("braid.collectives")
        ->warn("stall: {} #{} on group '{}' (rank {}/{}, {}) has waited {:.1f} s (stall_warn_s {:g}){}{}", op_name,
               op.seq, shape_.name, shape_.rank, shape_.size, backend_, waited,
               std::chrono::duration<double>(config_.stall_warn).count(), describe(missing),
               path.empty() ? "" : fmt::format("; flight recorder dumped to {}", path));
  }
}

HealthMonitor::Missing HealthMonitor::find_missing(uint64_t seq) {
  Missing m;
  if (!store_) {
    m.unknown = "the group has no store, so the ranks that did not join are unknown";
    return m;
  }
  try {
    for (int r = 0; r < shape_.size; ++r) {
      if (r == shape_.rank) continue;
      const std::string key = progress_key(r);
      if (!store_->check({key})) {
        m.never.push_back(r);
        continue;
      }
      const uint64_t at = std::stoull(store::to_string(store_->get(key, Millis(1000))));
      if (at < seq) m.behind.emplace_back(r, at);
    }
  } catch (const std::exception& e) {
    m.unknown = fmt::format("could not read the other ranks' progress: {}", e.what());
  }
  return m;
}

std::string HealthMonitor::describe(const Missing& m) {
  if (!m.unknown.empty()) return "; " + m.unknown;
  if (m.never.empty() && m.behind.empty()) return "; every rank entered this op (a peer may have failed inside it)";
  std::vector<std::string> parts;
  for (int r : m.never) parts.push_back(std::to_string(r));
  for (const auto& [r, at] : m.behind) parts.push_back(fmt::format("{} (last waited in #{})", r, at));
  return fmt::format("; ranks that never joined it: {}", fmt::join(parts, ", "));
}

std::string HealthMonitor::missing_ranks_report(uint64_t seq) { return describe(find_missing(seq)); }

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
