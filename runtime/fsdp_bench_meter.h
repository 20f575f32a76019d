// StateMeter: the bytes of parameters, gradients and optimizer state one rank holds during a training
// step, sampled where they peak, for `braid bench fsdp` (runtime/fsdp_bench.cc).
//
// What a sample counts (per rank):
//   * parameters: every parameter handle's current data (a shard, or the full tensor while its unit is
//     gathered), plus the shards a gathered unit keeps aside, plus the gathered storage of a unit whose
//     all-gather was issued (prefetch) but is not finished;
//   * gradients: every .grad, plus, in a unit's backward, the full-size gradients of that unit that the
//     engine hands its reduction node and the reduce-scatter input built from them (unit-sized, taken
//     per reduction);
//   * optimizer state: the tensors of the optimizer's state dict, once it has stepped (Adam's 0-dim
//     "step" counters included).
// tests/mp/fsdp/fsdp_meter_test.cc checks the count against one made by hand.
// Samples are taken after each unit's pre-forward (its parameters gathered), in the gradient hook of
// each unit's output that runs after FSDP's pre-backward (gathered again, its gradients about to arrive),
// and after the optimizer step. The peak is the largest sample: an accounting of what FSDP keeps alive,
// not of activations or of the process (the bench reports VmHWM for that).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace braid::runtime {

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

  nn::Module& model_;
  int64_t optimizer_bytes_ = 0;
  int64_t peak_ = 0;
  int64_t step_bytes_ = 0;
};

}  // namespace braid::runtime
