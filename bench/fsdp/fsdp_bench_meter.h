// StateMeter: the bytes of parameters, gradients and optimizer state one rank holds during a training
// step, sampled where they peak, for `braid bench fsdp` (bench/fsdp/fsdp_bench.cc).
//
// What a sample counts (per rank):
//   * parameters: every parameter handle's current data (a shard, or the full tensor while its unit is
//     gathered), plus the shards a gathered unit keeps aside, plus the gathered storage of a unit whose
//     all-gather was issued (prefetch) but is not finished;
//   * gradients: every .grad, plus, when a unit's reduction node runs, the full-size gradients the engine
//     hands it (the tensors themselves, measured in the node's pre-hooks) and, once it reduced them, the
//     shard gradients it made (its post-hook: the full ones are still held then);
//   * optimizer state: the tensors of the optimizer's state dict, once it has stepped (Adam's 0-dim
//     "step" counters included).
// tests/mp/fsdp/fsdp_meter_test.cc checks the count against one made by hand.
// Samples are taken after each unit's pre-forward (its parameters gathered), in the gradient hook of
// each unit's output that runs after FSDP's pre-backward (gathered again if backward needs them), as the
// unit's reduction node receives its full gradients and as it returns, and after the optimizer step. The peak is the
// largest sample: an accounting of what FSDP keeps alive. Gradients the engine holds for a unit while
// other ops of the same unit still run backward fall between samples (one op per unit, as in the bench's
// Linear units, leaves no such gap); the bench's allocator peak counts every tensor at every moment.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace braid::bench {

class StateMeter {
 public:
  // Hooks the units of `model` (a plain model has none: only after_step() samples then).
  explicit StateMeter(nn::Module& model);
  StateMeter(const StateMeter&) = delete;
  StateMeter& operator=(const StateMeter&) = delete;

  // After optimizer.step(), before zero_grad(): gradients and the optimizer's state are all there.
  void after_step(const nn::optim::Optimizer& optimizer);
  // Forgets the peak (after the warm-up steps).
  void reset_peak() { peak_ = 0; }
  int64_t peak_bytes() const { return peak_; }
  // The bytes of the last after_step() sample, and of its optimizer state.
  int64_t step_bytes() const { return step_bytes_; }
  int64_t optimizer_bytes() const { return optimizer_bytes_; }

 private:
  int64_t sample(int64_t in_flight);  // returns the sample
  void watch_reduction_node(nn::Module& unit_module);

  int64_t in_node_ = 0;  // full gradients received by the reduction node now running

  nn::Module& model_;
  int64_t optimizer_bytes_ = 0;
  int64_t peak_ = 0;
  int64_t step_bytes_ = 0;
};

}  // namespace braid::bench
