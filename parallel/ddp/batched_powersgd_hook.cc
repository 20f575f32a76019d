// batched_powersgd_hook (see powersgd_hook.h): the bucket as one padded square matrix.
#include <fmt/format.h>

#include <cmath>

#include "base/check.h"
#include "base/logging.h"
#include "parallel/ddp/default_hooks.h"
#include "parallel/ddp/powersgd_hook.h"
#include "parallel/ddp/powersgd_math.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/linalg.h"

namespace braid::parallel {

using collectives::ProcessGroup;
using collectives::TensorList;

class BatchedPowerSGDRunner {
 public:
  static Future<Tensor> run(PowerSGDState& s, GradBucket& bucket);
};

Future<Tensor> BatchedPowerSGDRunner::run(PowerSGDState& s, GradBucket& bucket) {
  ProcessGroup& group = *s.group_;
  const PowerSGDOptions& o = s.options_;
  const auto memory = s.memory_;
  const Tensor buffer = bucket.buffer();
  {
    std::lock_guard<std::mutex> lock(memory->mu);
    if (memory->iter < o.start_powersgd_iter || buffer.is_sparse()) {
      if (bucket.is_last()) ++memory->iter;  // an iteration ends with its last bucket
      return detail::allreduce_average(group, buffer);
    }
  }
  BRAID_CHECK_ARG(buffer.dim() == 1 && is_floating(buffer.dtype()),
                  "batched_powersgd_hook: bucket {} must hold a flat floating-point buffer, got {}", bucket.index(),
                  buffer.describe());
  const int ws = group.size();
  const int64_t total = buffer.numel();
  const auto side = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(total))));
  const int64_t padded = side * side;
  const int64_t r = std::min(side, o.matrix_approximation_rank);
  const TensorOptions like(buffer.dtype(), buffer.device());

  std::shared_ptr<PowerSGDState::BucketMemory> mem;
  {
    std::lock_guard<std::mutex> lock(memory->mu);
    auto& slot = memory->buckets[bucket.index()];
    if (!slot) slot = std::make_shared<PowerSGDState::BucketMemory>();
    mem = slot;
    memory->stats.numel_before_compression += total;
    memory->stats.numel_after_compression += 2 * side * r;
    memory->stats.compress_rate = static_cast<double>(memory->stats.numel_before_compression) /
                                  static_cast<double>(memory->stats.numel_after_compression);
  }
  const auto fits = [&](const Tensor& t, int64_t n) {
    return t.defined() && t.numel() == n && t.dtype() == buffer.dtype() && t.device() == buffer.device();
  };
  // The padded matrix: the bucket, then zeros.
  Tensor work = zeros({padded}, like);
  work.narrow(0, 0, total).copy_(buffer);
  Tensor input_copy;
  if (o.use_error_feedback) {
    if (fits(mem->error, padded)) {
      work.add_(mem->error);
    } else {
      if (mem->error.defined() && mem->error.device() == buffer.device()) {
        logging::get("braid.ddp")->warn("batched PowerSGD: bucket {} changed size; its error memory starts again",
                                        bucket.index());
      }
      mem->error = zeros({padded}, like);
    }
    input_copy = work.clone();
  }
  const Tensor matrix = work.view({side, side});
  if (!fits(mem->pu, side * r)) mem->pu = empty({side * r}, like);
  const bool fresh_q = !o.warm_start || !fits(mem->q, side * r);
  if (fresh_q) {
    mem->q = empty({side * r}, like);
    Generator gen(s.rng_.next_u64() % 1'000'000'000);  // the same seed sequence on every rank
    mem->q.copy_(randn({side * r}, buffer.dtype(), &gen));
  }
  const Tensor p = mem->pu.view({side, r});
  const Tensor q = mem->q.view({side, r});
  powersgd_orthogonalize(q, o.orthogonalization_epsilon);
  mm_out(p, matrix, q);
  {
    TensorList list{mem->pu};
    group.allreduce(list)->wait();  // issued and awaited on this thread: one op order on every rank
  }
  powersgd_orthogonalize(p, o.orthogonalization_epsilon);
  mm_out(q, matrix.t(), p);
  TensorList q_list{mem->q};
  Future<TensorList> q_done = group.allreduce(q_list)->get_future();
  return q_done.then(
      [memory, mem, p, q, matrix, work, buffer, input_copy, ws, total, is_last = bucket.is_last()](const TensorList&) {
        binary_(BinaryOp::Div, q, Scalar(ws));
        mm_out(matrix, p, q.t());
        if (input_copy.defined()) {
          mem->error.copy_(input_copy);
          mem->error.sub_(work);
        }
        buffer.copy_(work.narrow(0, 0, total));
        std::lock_guard<std::mutex> lock(memory->mu);
        if (is_last) ++memory->iter;
        return buffer;
      },
      fmt::format("batched_powersgd_hook of bucket {}", bucket.index()));
}

NamedCommHook batched_powersgd_hook(std::shared_ptr<PowerSGDState> state) {
  BRAID_CHECK_ARG(state != nullptr, "batched_powersgd_hook: the state must not be null");
  NamedCommHook hook{"batched_powersgd",
                     [state](GradBucket& bucket) { return BatchedPowerSGDRunner::run(*state, bucket); }};
  hook.state_dict = [state] { return state->state_dict(); };
  hook.load_state_dict = [state](const CommHookState& st) { state->load_state_dict(st); };
  return hook;
}

}  // namespace braid::parallel
