// PyTorch's DdpUnderDistAutogradTest.test_backward_no_ddp (DdpMode NONE, ddp_under_dist_autograd_test.py) on
// 6 ranks: trainers 0-3, the remote worker 4 and the master 5. The master creates RemoteEM(2, 3) and
// RemoteNet(5, 3) on worker4 and a Trainer on every trainer, then runs 3 rounds of train_batch on all
// trainers at once. Each trainer runs one distributed autograd context per round: forward through both remote
// modules, loss = (output * values).sum(), distributed backward, get_gradients.
//
// Expected values: what PyTorch 1.13 computes for that test, reproduced by hybrid_reference.py (PyTorch, one
// process; its output is hybrid_reference.txt). By hand for trainer 0: output is
// [-3.5, -3.5, 3.5, 3.5], so dloss/doutput = sum(values) = -4 per row; fc2.weight's gradient is
// -4 * (2 * [3.5, 0, 0] + 2 * [3.5, 3.5, 3.5]) = [-56, -28, -28]; the hidden gradient is [-4, 4, 4, 4, 4]
// for rows 0-1 and [-12, -4, -4, -4, -4] for rows 2-3, which gives fc1.weight [[-32, -16], [0, -16]],
// worker4's net weight [[-16, 16, 8, 8, 8], [0, -16, -4, -4, -4] x 2] and an all-zero em.weight gradient
// (the embedding rows' contributions cancel).
#include <catch2/catch.hpp>

#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/mp/dist_autograd/da_models.h"
#include "tests/mp/rpc/rpc_mp.h"

namespace braid::mp {
namespace {

using rpc::Value;

struct Golden {
  std::vector<float> fc1;
  std::vector<float> fc2;
};

// PyTorch's values in NONE mode (hybrid_reference.txt): the non-DDP gradients each trainer returns.
const Golden kGolden[kNumTrainers] = {
    {{-32, -16, 0, -16}, {-56, -28, -28}},
    {{16, -16, 16, -16}, {0, -28, -28}},
    {{-16, 16, -16, 16}, {0, 28, 28}},
    {{32, 16, 0, 16}, {56, 28, 28}},
};

TEST_CASE_METHOD(MpFixture, "dist_autograd: hybrid model (test_backward_no_ddp), mode NONE, 4 trainers, 3 rounds",
                 "[dist_autograd][hybrid]") {
  if (size() != kNumTrainers + 2) return;  // the torch test's job: 4 trainers, the remote worker, the master
  register_dist_autograd_test_functions();
  RpcJob job(*this);
  if (rank() == kMasterRank) {
    rpc::RRef em = rpc::remote("worker4", "da.RemoteEM", {Value(2), Value(3)});
    rpc::RRef net = rpc::remote("worker4", "da.RemoteNet", {Value(5), Value(3)});
    std::vector<rpc::RRef> trainers;
    for (int t = 0; t < kNumTrainers; ++t) {
      trainers.push_back(rpc::remote(worker_name(t), "da.Trainer", {Value(em), Value(net)}));
    }
    const auto examples = training_examples();
    for (int round = 0; round < 3; ++round) {
      std::vector<Future<Value>> futures;
      for (int t = 0; t < kNumTrainers; ++t) {
        const MiniBatch& b = examples[static_cast<size_t>(t)];
        futures.push_back(trainers[static_cast<size_t>(t)].rpc_async().call(
            "train_batch", {Value(b.dense), Value(b.sparse), Value(b.values)}));
      }
      for (int t = 0; t < kNumTrainers; ++t) {
        INFO("round " << round << ", trainer " << t);
        const rpc::ValueList r = futures[static_cast<size_t>(t)].value(rpc::Millis(120'000)).items();
        const Tensor fc1 = r.at(0).as_tensor();
        const Tensor fc2 = r.at(1).as_tensor();
        // The torch test's assertion: every non-DDP gradient is non-zero ...
        CHECK_FALSE(equal(fc1, zeros(fc1.shape())));
        CHECK_FALSE(equal(fc2, zeros(fc2.shape())));
        // ... and braid's: each equals PyTorch's value exactly (float32 sums of small integers).
        CHECK(equal(fc1, from_vector(kGolden[t].fc1, {2, 2})));
        CHECK(equal(fc2, from_vector(kGolden[t].fc2, {1, 3})));
        CHECK(r.at(5).as_int() == 2);       // fc1.weight and fc2.weight on the trainer
        CHECK(r.at(6).as_int() == 2);       // em.weight and fc.weight on worker4
        CHECK_FALSE(r.at(7).as_bool());     // .grad untouched
        if (t == 0) {
          CHECK(equal(r.at(4).as_tensor(), from_vector<float>({-3.5f, -3.5f, 3.5f, 3.5f}, {4, 1})));
          CHECK(equal(r.at(2).as_tensor(), zeros({2, 3})));
          CHECK(equal(r.at(3).as_tensor(), from_vector<float>({-16, 16, 8, 8, 8, 0, -16, -4, -4, -4, 0, -16, -4,
                                                              -4, -4}, {3, 5})));
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid::mp
