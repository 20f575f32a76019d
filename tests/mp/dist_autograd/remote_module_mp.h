// What the RemoteModule / DistributedOptimizer multi-process tests share: the module class and the RPC
// functions every worker registers before its RpcJob starts, and the known values the tests compute by hand.
#pragma once

#include <vector>

#include "tensor/factory.h"
#include "tensor/tensor.h"

namespace braid::mp {

// Registers, once per process:
//   module class "rm.FixedLinear"(weight [out, in], bias [out] or None): an nn::Linear with those values;
//   "rm.load_params"(module_rref, [tensors]) -> None: copies the tensors into the module's parameters, in
//       order, on the owner;
//   "rm.context_grads"(module_rref, context_id) -> [gradient or None per parameter]: the owner's gradients of
//       its module's parameters in that context (get_remote_grads of PyTorch's
//       ddp_under_dist_autograd_test.py).
void register_remote_module_test_classes();

inline Tensor mat(std::vector<float> values, Shape shape) { return from_vector(values, shape); }

// Linear(2, 3): W, b, an input x and y = x W^T + b, by hand.
inline Tensor known_w() { return mat({1, 2, 3, 4, 5, 6}, {3, 2}); }
inline Tensor known_b() { return mat({0.5f, -1, 2}, {3}); }
inline Tensor known_x() { return mat({1, -1, 2, 0.5f}, {2, 2}); }
inline Tensor known_y() { return mat({-0.5f, -2, 1, 3.5f, 7, 15}, {2, 3}); }

}  // namespace braid::mp
