// The models of PyTorch's ddp_under_dist_autograd_test.py (DdpUnderDistAutogradTest) and the functions the
// distributed autograd tests call on each other, registered on every rank before its RPC job starts.
//
//   RemoteEM(2, 3)   EmbeddingBag, mode mean, weight all 0.5; forward(indices of shape (B,)) puts each
//                    index in its own bag (offsets 0..B-1)
//   RemoteNet(5, 3)  relu(getLinear(5, 3)(x))
//   getLinear(i, o)  a bias-free Linear whose weight is all ones except w[0][0] = -1
//   Trainer          fc1 = getLinear(2, 2), fc2 = getLinear(3, 1), the two remote modules by RRef
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace braid::mp {

inline constexpr int kNumTrainers = 4;
inline constexpr int kRemoteWorkerRank = 4;
inline constexpr int kMasterRank = 5;

// Registers the classes and functions below in rpc::global_registry() (once per process).
void register_dist_autograd_test_functions();

// One trainer's mini-batch of the torch test's get_training_examples(): 4 rows.
struct MiniBatch {
  Tensor dense;   // (4, 2) float32
  Tensor sparse;  // (4,) int64
  Tensor values;  // (4,) float32
};
// The 16 examples in the torch test's loop order, split into kNumTrainers contiguous blocks.
std::vector<MiniBatch> training_examples();

}  // namespace braid::mp
