#include "parallel/flat_params.h"

namespace braid::parallel {

Tensor pack_params(const std::vector<Tensor>& params, const std::vector<size_t>& indices, Device where) {
  int64_t total = 0;
  for (size_t i : indices) total += params[i].numel();
  Tensor flat = Tensor::empty({total}, TensorOptions(params[indices.at(0)].dtype(), where));
  int64_t at = 0;
  for (size_t i : indices) {
    flat.narrow(0, at, params[i].numel()).copy_(params[i].reshape({-1}));
    at += params[i].numel();
  }
  return flat;
}

void unpack_params(const Tensor& flat, const std::vector<Tensor>& params, const std::vector<size_t>& indices) {
  int64_t at = 0;
  for (size_t i : indices) {
    params[i].copy_(flat.narrow(0, at, params[i].numel()).view(params[i].shape()));
    at += params[i].numel();
  }
}

}  // namespace braid::parallel
