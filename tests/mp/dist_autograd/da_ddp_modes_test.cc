// The DDP modes of PyTorch's ddp_under_dist_autograd_test.py (test_backward_ddp_inside / _ddp_outside /
// _ddp_outside_uneven_inputs) on 6 ranks: trainers 0-3 reduce over a group of their own, worker4 hosts the
// remote modules, the master (rank 5) drives 3 rounds. DDP runs inside distributed autograd contexts, so the
// averaged gradients go to each context's map. Expected values: PyTorch's, reproduced by hybrid_reference.py.
// With even inputs every DDP gradient is exactly 0 (the examples cancel over the trainers) and INSIDE's fc1
// keeps the NONE values; with uneven inputs under join, the last micro-batch's DDP gradients are the table's.
#include <catch2/catch.hpp>

#include "collectives/registry/group_registry.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/mp/dist_autograd/da_ddp_trainer.h"
#include "tests/mp/dist_autograd/da_models.h"
#include "tests/mp/rpc/rpc_mp.h"
#include "tests/mp/support/default_group.h"

namespace braid::mp {
namespace {

using rpc::Value;

// The trainers' group and the default group around one test; released after the RPC job.
struct TrainerGroups {
  explicit TrainerGroups(MpFixture& f) : world(f) { set_trainer_group(collectives::new_group({0, 1, 2, 3})); }
  ~TrainerGroups() { set_trainer_group(nullptr); }
  DefaultGroupScope world;
  TrainerGroups(const TrainerGroups&) = delete;
  TrainerGroups& operator=(const TrainerGroups&) = delete;
};

// Runs the master's 3 rounds; returns the last round's [ddp grads, other grads] per trainer.
std::vector<rpc::ValueList> run_master(DdpMode mode, bool uneven) {
  rpc::RRef em = rpc::remote("worker4", "da.RemoteEM", {Value(2), Value(3)});
  rpc::RRef net = rpc::remote("worker4", "da.RemoteNet", {Value(5), Value(3)});
  std::vector<rpc::RRef> trainers;
  for (int t = 0; t < kNumTrainers; ++t) {
    trainers.push_back(rpc::remote(worker_name(t), "da.DdpTrainer", {Value(em), Value(net), Value(static_cast<int>(mode))}));
  }
  const auto examples = training_examples();
  std::vector<rpc::ValueList> last;
  for (int round = 0; round < 3; ++round) {
    std::vector<Future<Value>> futures;
    for (int t = 0; t < kNumTrainers; ++t) {
      const MiniBatch& b = examples[static_cast<size_t>(t)];
      const bool less = uneven && t < kNumTrainers / 2;
      futures.push_back(trainers[static_cast<size_t>(t)].rpc_async().call(
          "train_batch", {Value(b.dense), Value(b.sparse), Value(b.values), Value(less), Value(uneven)}));
    }
    last.clear();
    for (auto& f : futures) last.push_back(f.value(rpc::Millis(120'000)).items());
  }
  return last;
}

bool all_zero(const Tensor& t) { return equal(t, zeros(t.shape())); }

TEST_CASE_METHOD(MpFixture, "dist_autograd + DDP: hybrid model, modes INSIDE and OUTSIDE, even inputs",
                 "[dist_autograd][ddp][hybrid]") {
  if (size() != kNumTrainers + 2) return;
  register_dist_autograd_test_functions();
  register_ddp_trainer();
  TrainerGroups groups(*this);
  {
    RpcJob job(*this);
    if (rank() == kMasterRank) {
      const auto inside = run_master(DdpMode::kInside, false);
      const std::vector<float> fc1_none[kNumTrainers] = {
          {-32, -16, 0, -16}, {16, -16, 16, -16}, {-16, 16, -16, 16}, {32, 16, 0, 16}};
      for (int t = 0; t < kNumTrainers; ++t) {
        INFO("INSIDE, trainer " << t);
        const auto& ddp = inside[static_cast<size_t>(t)].at(0).items();
        const auto& other = inside[static_cast<size_t>(t)].at(1).items();
        REQUIRE(ddp.size() == 1);
        REQUIRE(other.size() == 1);
        CHECK(all_zero(ddp[0].as_tensor()));  // fc2, averaged over the trainers: the examples cancel
        CHECK(equal(other[0].as_tensor(), from_vector(fc1_none[t], {2, 2})));
      }
      const auto outside = run_master(DdpMode::kOutside, false);
      for (int t = 0; t < kNumTrainers; ++t) {
        INFO("OUTSIDE, trainer " << t);
        const auto& ddp = outside[static_cast<size_t>(t)].at(0).items();
        REQUIRE(ddp.size() == 2);
        CHECK(outside[static_cast<size_t>(t)].at(1).items().empty());
        for (const auto& g : ddp) CHECK(all_zero(g.as_tensor()));
      }
    }
  }
}

TEST_CASE_METHOD(MpFixture, "dist_autograd + DDP: hybrid model, OUTSIDE with uneven inputs under join",
                 "[dist_autograd][ddp][hybrid]") {
  if (size() != kNumTrainers + 2) return;
  register_dist_autograd_test_functions();
  register_ddp_trainer();
  TrainerGroups groups(*this);
  {
    RpcJob job(*this);
    if (rank() == kMasterRank) {
      const auto last = run_master(DdpMode::kOutside, true);
      for (int t = 0; t < kNumTrainers; ++t) {
        INFO("trainer " << t);
        const auto& ddp = last[static_cast<size_t>(t)].at(0).items();
        REQUIRE(ddp.size() == 2);
        if (t < 2) {  // one micro-batch, all 4 trainers active: divided by 4
          CHECK(equal(ddp[0].as_tensor(), from_vector<float>({0, 12, 0, 4}, {2, 2})));
          CHECK(equal(ddp[1].as_tensor(), from_vector<float>({0, 14, 14}, {1, 3})));
        } else {  // the second micro-batch: trainers 2 and 3 only, joined ranks add zeros, divided by 4
          CHECK(equal(ddp[0].as_tensor(), from_vector<float>({2, -2, -2, 2}, {2, 2})));
          CHECK(equal(ddp[1].as_tensor(), from_vector<float>({7, 0, 0}, {1, 3})));
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid::mp
