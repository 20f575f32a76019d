// DDP's mixed_precision.param_dtype (PyTorch's _MixedPrecision): the forward and backward run on
// low-precision copies of the parameters, while the parameters keep their full-precision values for the
// optimizer.
//
// Before each forward, every floating parameter's data become a low-precision copy of its full-precision
// values (a buffer per parameter, reused every iteration). The backward then computes gradients in that
// precision. Once its last node has run, before the Reducer writes the averages back (its callback is
// queued after ours), the parameters get their full-precision data back, untouched by the low-precision
// round trip, and each .grad is upcast in place: the same tensor, so the Reducer's write-back fills it
// with the reduced values in full precision.
//
// Restoring happens once per backward through a post-accumulate hook that DDP installs before the
// Reducer's own; a forward whose outputs need no backward (eval, no_grad) restores at once; a forward
// that is never followed by a backward is restored by the next forward or by the DDP's destruction.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "tensor/tensor.h"

namespace braid::parallel {

class ParamPrecision : public std::enable_shared_from_this<ParamPrecision> {
 public:
  // `params`: DDP's managed parameters; those that are not floating, or already `dtype`, are left alone.
  static std::shared_ptr<ParamPrecision> create(const std::vector<Tensor>& params, DType dtype);

  DType dtype() const { return dtype_; }
  // The parameters' data become low-precision copies (restoring first if a previous forward left them so).
  void to_low_precision();
  // Full-precision data back and .grad upcast; a no-op when the parameters are in full precision.
  void restore();
  bool low_precision() const;

 private:
  ParamPrecision(std::vector<Tensor> params, DType dtype) : params_(std::move(params)), dtype_(dtype) {}
  void install_hooks();
  void restore_locked();

  const std::vector<Tensor> params_;  // the floating parameters not already in dtype_
  const DType dtype_;
  mutable std::mutex mu_;
  std::vector<Tensor> full_;          // GUARDED_BY(mu_): the parameters' full-precision data while low
  std::vector<Tensor> low_;           // GUARDED_BY(mu_): reused low-precision buffers
  bool low_now_ = false;              // GUARDED_BY(mu_)
  bool restore_queued_ = false;       // GUARDED_BY(mu_)
};

}  // namespace braid::parallel
