// PowerSGD (see powersgd_hook.h for the algorithm, the differences from PyTorch and the threading).
#include "parallel/ddp/powersgd_hook.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "parallel/ddp/default_hooks.h"
#include "parallel/ddp/powersgd_math.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/linalg.h"
#include "tensor/ops/reduce.h"

namespace braid::parallel {

using collectives::ProcessGroup;
using collectives::TensorList;

namespace {

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.ddp"); }


// Views into `work` (the bucket's buffer) at the places bucket.gradients() occupy in it.
// A bucket that lists no gradients is taken as one flat gradient (reduced uncompressed).
std::vector<Tensor> gradient_views(const GradBucket& bucket, const Tensor& work) {
  const Tensor& buffer = bucket.buffer();
  std::vector<Tensor> views;
  if (bucket.gradients().empty()) {
    views.push_back(work);
    return views;
  }
  for (size_t i = 0; i < bucket.gradients().size(); ++i) {
    const Tensor& g = bucket.gradients()[i];
    BRAID_CHECK_ARG(g.defined() && g.shares_storage_with(buffer) && g.is_contiguous(),
                    "powersgd_hook: gradient {} of bucket {} ({}) must be a contiguous view into the bucket's buffer",
                    i, bucket.index(), g.defined() ? g.describe() : std::string("undefined"));
    const int64_t offset = g.storage_offset() - buffer.storage_offset();
    BRAID_CHECK_ARG(offset >= 0 && offset + g.numel() <= buffer.numel(),
                    "powersgd_hook: gradient {} of bucket {} ({}) lies outside the buffer ({} elements at offset {})",
                    i, bucket.index(), g.describe(), buffer.numel(), offset);
    views.push_back(work.narrow(0, offset, g.numel()).view(g.shape()));
  }
  return views;
}

struct Compressed {
  Tensor matrix;  // [n, m] view into the buffer
  Tensor p;       // [n, r] view into BucketMemory::pu
  Tensor q;       // [m, r] view into BucketMemory::q
};

}  // namespace

// The hook's body; a friend of PowerSGDState.
class PowerSGDRunner {
 public:
  static Future<Tensor> run(PowerSGDState& state, GradBucket& bucket);

 private:
  using BucketMemory = PowerSGDState::BucketMemory;
  using Memory = PowerSGDState::Memory;

  // PyTorch's maybe_increase_iter: an iteration ends with its last bucket.
  static void maybe_increase_iter_locked(Memory& m, bool is_last_bucket, int64_t start_iter) {
    if (!is_last_bucket) return;
    if (++m.iter == start_iter) logger()->debug("PowerSGD: start to apply PowerSGD after {} iterations", m.iter);
  }
  static std::shared_ptr<BucketMemory> bucket_memory(Memory& m, size_t index) {
    std::lock_guard<std::mutex> lock(m.mu);
    auto& slot = m.buckets[index];
    if (!slot) slot = std::make_shared<BucketMemory>();
    return slot;
  }
  static void add_stats(Memory& m, bool is_last_bucket, int64_t before, int64_t after, int64_t frequency) {
    std::lock_guard<std::mutex> lock(m.mu);
    auto& st = m.stats;
    st.numel_before_compression += before;
    st.numel_after_compression += after;
    st.compress_rate = st.numel_after_compression > 0
                           ? static_cast<double>(st.numel_before_compression) / static_cast<double>(st.numel_after_compression)
                           : 0;
    if (is_last_bucket && m.iter >= m.next_stats_report) {
      logger()->info("PowerSGD compression stats: iter {}, total before compression {}, total after compression {}, rate {:.3f}",
                     m.iter, st.numel_before_compression, st.numel_after_compression, st.compress_rate);
      m.next_stats_report += frequency;
    }
  }
};

Future<Tensor> PowerSGDRunner::run(PowerSGDState& s, GradBucket& bucket) {
  ProcessGroup& group = *s.group_;
  const PowerSGDOptions& o = s.options_;
  const std::shared_ptr<Memory> memory = s.memory_;
  const Tensor buffer = bucket.buffer();
  {
    std::lock_guard<std::mutex> lock(memory->mu);
    if (memory->iter < o.start_powersgd_iter || buffer.is_sparse()) {
      maybe_increase_iter_locked(*memory, bucket.is_last(), o.start_powersgd_iter);
      return detail::allreduce_average(group, buffer);
    }
  }
  BRAID_CHECK_ARG(buffer.dim() == 1 && is_floating(buffer.dtype()),
                  "powersgd_hook: bucket {} must hold a flat floating-point buffer, got {}", bucket.index(),
                  buffer.describe());
  const int ws = group.size();
  const DType dtype = buffer.dtype();
  const TensorOptions like(dtype, buffer.device());  // every tensor of the computation lives with the buffer
  const std::vector<Tensor> grads = gradient_views(bucket, buffer);
  const std::shared_ptr<BucketMemory> mem = bucket_memory(*memory, bucket.index());
  // Memory restored from a checkpoint is on the CPU: it moves to the bucket's device at its first use.
  if (mem->error.defined() && mem->error.device() != buffer.device()) mem->error = mem->error.to(buffer.device());
  if (mem->q.defined() && mem->q.device() != buffer.device()) mem->q = mem->q.to(buffer.device());

  // 1. Error feedback; the input is kept to compute the next error from.
  Tensor input_copy;
  if (o.use_error_feedback) {
    if (mem->error.defined() && mem->error.numel() == buffer.numel() && mem->error.dtype() == dtype &&
        mem->error.device() == buffer.device()) {
      buffer.add_(mem->error);
    } else {
      if (mem->error.defined()) {
        logger()->warn("PowerSGD: bucket {} changed from {} to {} elements; its error memory starts again from zeros",
                       bucket.index(), mem->error.numel(), buffer.numel());
      }
      mem->error = zeros({buffer.numel()}, like);
    }
    input_copy = buffer.clone();
  }

  // 2. Which gradients are worth compressing.
  std::vector<Tensor> uncompressed;
  std::vector<Compressed> compressed;
  std::vector<int64_t> ranks;
  int64_t uncompressed_numel = 0, total_p = 0, total_q = 0, before = 0, after = 0;
  for (const Tensor& g : grads) {
    if (g.dim() == 0 || g.numel() == 0) {
      uncompressed.push_back(g);
      uncompressed_numel += g.numel();
      before += g.numel();
      after += g.numel();
      continue;
    }
    const int64_t n = g.size(0), m = g.numel() / n;
    const int64_t r = std::min({n, m, o.matrix_approximation_rank});
    const int64_t full = n * m, low_rank = (n + m) * r;
    before += full;
    if (static_cast<double>(low_rank) * o.min_compression_rate < static_cast<double>(full)) {
      compressed.push_back({g.view({n, m}), Tensor(), Tensor()});
      ranks.push_back(r);
      total_p += n * r;
      total_q += m * r;
      after += low_rank;
    } else {
      uncompressed.push_back(g);
      uncompressed_numel += full;
      after += full;
    }
  }
  add_stats(*memory, bucket.is_last(), before, after, o.compression_stats_logging_frequency);

  // 3. Memory for [uncompressed | P] and Q; Q is warm-started when it exists with this layout.
  const int64_t pu_numel = uncompressed_numel + total_p;
  if (!mem->pu.defined() || mem->pu.numel() != pu_numel || mem->pu.dtype() != dtype ||
      mem->pu.device() != buffer.device()) {
    mem->pu = empty({pu_numel}, like);
  }
  const bool fresh_q = !o.warm_start || !mem->q.defined() || mem->q.numel() != total_q || mem->q.dtype() != dtype ||
                       mem->q.device() != buffer.device();
  if (fresh_q) {
    if (o.warm_start && mem->q.defined()) {
      logger()->warn("PowerSGD: bucket {} changed layout; its Q is drawn again", bucket.index());
    }
    mem->q = empty({total_q}, like);
  }
  for (int64_t i = 0, p_at = uncompressed_numel, q_at = 0; i < static_cast<int64_t>(compressed.size()); ++i) {
    Compressed& c = compressed[static_cast<size_t>(i)];
    const int64_t n = c.matrix.size(0), m = c.matrix.size(1), r = ranks[static_cast<size_t>(i)];
    c.p = mem->pu.narrow(0, p_at, n * r).view({n, r});
    c.q = mem->q.narrow(0, q_at, m * r).view({m, r});
    p_at += n * r;
    q_at += m * r;
  }
  if (fresh_q) {
    // Equal on every rank: the same seed sequence, drawn in the same order.
    Generator gen(s.rng_.next_u64() % 1'000'000'000);
    for (auto& c : compressed) c.q.copy_(randn(c.q.shape(), dtype, &gen));
  }
  for (auto& c : compressed) powersgd_orthogonalize(c.q, o.orthogonalization_epsilon);

  // 4. P = M Q and the uncompressed gradients in one allreduce; this thread waits for it (header comment).
  for (auto& c : compressed) mm_out(c.p, c.matrix, c.q);
  for (int64_t at = 0; const Tensor& g : uncompressed) {
    mem->pu.narrow(0, at, g.numel()).copy_(g.reshape({g.numel()}));
    at += g.numel();
  }
  if (pu_numel > 0) {
    TensorList list{mem->pu};
    group.allreduce(list)->wait();
  }
  const Tensor averaged = mem->pu.narrow(0, 0, uncompressed_numel);
  binary_(BinaryOp::Div, averaged, Scalar(ws));
  for (int64_t at = 0; const Tensor& g : uncompressed) {
    g.copy_(averaged.narrow(0, at, g.numel()).view(g.shape()));
    at += g.numel();
  }
  for (auto& c : compressed) {
    powersgd_orthogonalize(c.p, o.orthogonalization_epsilon);  // the sum over ranks: no need to divide first
    mm_out(c.q, c.matrix.t(), c.p);
  }

  // Q allreduced asynchronously; M = P Q^T / ws and step 5 when it completes. The callback holds the
  // memory, not the state (see PowerSGDState::Memory).
  Future<TensorList> q_done(fmt::format("powersgd_hook Q allreduce of bucket {}", bucket.index()));
  TensorList q_list{mem->q};
  if (total_q > 0) {
    q_done = group.allreduce(q_list)->get_future();
  } else {
    q_done.set_value(q_list);
  }
  return q_done.then(
      [memory, mem, compressed, buffer, input_copy, ws, is_last = bucket.is_last(),
       start = o.start_powersgd_iter](const TensorList& /*reduced: mem->q, in place*/) {
        binary_(BinaryOp::Div, mem->q, Scalar(ws));
        for (const auto& c : compressed) mm_out(c.matrix, c.p, c.q.t());
        if (input_copy.defined()) {
          mem->error.copy_(input_copy);
          mem->error.sub_(buffer);
        }
        std::lock_guard<std::mutex> lock(memory->mu);
        maybe_increase_iter_locked(*memory, is_last, start);
        return buffer;
      },
      fmt::format("powersgd_hook of bucket {}", bucket.index()));
}

PowerSGDState::PowerSGDState(std::shared_ptr<ProcessGroup> group, PowerSGDOptions options)
    : group_(detail::checked_group(std::move(group), "PowerSGDState")),
      options_(options),
      rng_(options.random_seed),
      memory_(std::make_shared<Memory>()) {
  BRAID_CHECK_ARG(options_.matrix_approximation_rank >= 1,
                  "PowerSGDState: matrix_approximation_rank must be at least 1, got {}",
                  options_.matrix_approximation_rank);
  BRAID_CHECK_ARG(!((options_.use_error_feedback || options_.warm_start) && options_.start_powersgd_iter <= 1),
                  "Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, because "
                  "PowerSGD can only be applied after the first two iterations in DDP (got start_powerSGD_iter {}).",
                  options_.start_powersgd_iter);
  options_.compression_stats_logging_frequency = std::max<int64_t>(1, options_.compression_stats_logging_frequency);
  logger()->debug(
      "PowerSGD config: matrix_approximation_rank = {}; start_powerSGD_iter = {}; min_compression_rate = {}; "
      "orthogonalization_epsilon = {}; random_seed = {}; compression_stats_logging_frequency = {}; "
      "use_error_feedback = {}; warm_start = {}",
      options_.matrix_approximation_rank, options_.start_powersgd_iter, options_.min_compression_rate,
      options_.orthogonalization_epsilon, options_.random_seed, options_.compression_stats_logging_frequency,
      options_.use_error_feedback, options_.warm_start);
}

int64_t PowerSGDState::iteration() const {
  std::lock_guard<std::mutex> lock(memory_->mu);
  return memory_->iter;
}

PowerSGDCompressionStats PowerSGDState::compression_stats() const {
  std::lock_guard<std::mutex> lock(memory_->mu);
  return memory_->stats;
}

Tensor PowerSGDState::error(size_t bucket_index) const {
  std::lock_guard<std::mutex> lock(memory_->mu);
  const auto it = memory_->buckets.find(bucket_index);
  if (it == memory_->buckets.end() || !it->second->error.defined()) return Tensor();
  return it->second->error.clone();
}

std::vector<std::pair<std::string, Tensor>> PowerSGDState::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::lock_guard<std::mutex> lock(memory_->mu);
  out.emplace_back("iter", from_vector(std::vector<int64_t>{memory_->iter}, {1}));
  out.emplace_back("stats", from_vector(std::vector<int64_t>{memory_->stats.numel_before_compression,
                                                             memory_->stats.numel_after_compression,
                                                             memory_->next_stats_report}));
  out.emplace_back("rng", bytes_tensor(rng_.save_state()));
  for (const auto& [index, mem] : memory_->buckets) {
    if (mem->error.defined()) out.emplace_back(fmt::format("bucket.{}.error", index), mem->error.cpu().clone());
    if (mem->q.defined()) out.emplace_back(fmt::format("bucket.{}.q", index), mem->q.cpu().clone());
  }
  return out;
}

void PowerSGDState::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  // Everything is checked before anything changes.
  auto counters = [](const std::string& key, const Tensor& t, int64_t n) {
    BRAID_CHECK_ARG(t.defined() && t.dtype() == DType::Int64 && t.dim() == 1 && t.numel() == n,
                    "PowerSGDState::load_state_dict: '{}' must be {} int64 value(s), got {}", key, n,
                    t.defined() ? t.describe() : std::string("an undefined tensor"));
    return to_vector<int64_t>(t);
  };
  std::optional<std::vector<int64_t>> iter, stats;
  std::optional<std::string> rng;
  std::map<size_t, BucketMemory> buckets;
  for (const auto& [key, t] : state) {
    if (key == "iter") {
      iter = counters(key, t, 1);
    } else if (key == "stats") {
      stats = counters(key, t, 3);
    } else if (key == "rng") {
      rng = tensor_bytes(t, "PowerSGDState::load_state_dict: 'rng'");
      Generator probe;
      probe.restore_state(*rng);
    } else if (key.rfind("bucket.", 0) == 0) {
      const size_t dot = key.find('.', 7);
      const std::string field = dot == std::string::npos ? "" : key.substr(dot + 1);
      const std::string number = key.substr(7, dot == std::string::npos ? std::string::npos : dot - 7);
      BRAID_CHECK_ARG((field == "error" || field == "q") && !number.empty() &&
                          number.find_first_not_of("0123456789") == std::string::npos && number.size() < 10,
                      "PowerSGDState::load_state_dict: unexpected entry '{}' (expected bucket.<i>.error or bucket.<i>.q)", key);
      BRAID_CHECK_ARG(t.defined() && t.dim() == 1 && is_floating(t.dtype()),
                      "PowerSGDState::load_state_dict: '{}' must be a 1-D floating-point tensor, got {}", key,
                      t.defined() ? t.describe() : std::string("an undefined tensor"));
      BucketMemory& m = buckets[static_cast<size_t>(std::stoul(number))];
      (field == "error" ? m.error : m.q) = t.clone();
    } else {
      BRAID_THROW(InvalidArgument, "PowerSGDState::load_state_dict: unexpected entry '{}'", key);
    }
  }
  BRAID_CHECK_ARG(iter && stats && rng, "PowerSGDState::load_state_dict: the state lacks {}",
                  !iter ? "'iter'" : !stats ? "'stats'" : "'rng'");
  rng_.restore_state(*rng);
  std::lock_guard<std::mutex> lock(memory_->mu);
  memory_->iter = iter->at(0);
  memory_->stats.numel_before_compression = stats->at(0);
  memory_->stats.numel_after_compression = stats->at(1);
  memory_->stats.compress_rate =
      stats->at(1) > 0 ? static_cast<double>(stats->at(0)) / static_cast<double>(stats->at(1)) : 0;
  memory_->next_stats_report = stats->at(2);
  memory_->buckets.clear();
  for (auto& [index, m] : buckets) memory_->buckets[index] = std::make_shared<BucketMemory>(std::move(m));
}

NamedCommHook powersgd_hook(std::shared_ptr<PowerSGDState> state) {
  BRAID_CHECK_ARG(state != nullptr, "powersgd_hook: the state must not be null");
  NamedCommHook hook{"powersgd", [state](GradBucket& bucket) { return PowerSGDRunner::run(*state, bucket); }};
  hook.state_dict = [state] { return state->state_dict(); };
  hook.load_state_dict = [state](const CommHookState& s) { state->load_state_dict(s); };
  return hook;
}

}  // namespace braid::parallel
