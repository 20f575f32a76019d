// braid's BatchNorm1d/2d replay PyTorch 1.13's: tests/fixtures/batch_norm_reference.json (written by
// tests/fixtures/make_batch_norm_fixtures.py) holds each case's weights, the inputs and output gradients of
// a few training steps, and torch's outputs, input/parameter gradients, running statistics and
// num_batches_tracked after each, then an eval-mode forward.
#include <catch2/catch.hpp>

#include <memory>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/batch_norm.h"
#include "tensor/compare.h"
#include "tests/support/torch_fixture.h"

namespace braid::nn {
namespace {

using nlohmann::json;
using testing::fixture_case;
using testing::fixture_tensor;
using Catch::Contains;

const json& fixture() {
  static const json doc = testing::load_torch_fixture("batch_norm_reference.json");
  return doc;
}

std::shared_ptr<BatchNorm> make(const json& c) {
  const int64_t n = c.at("num_features");
  const double eps = c.at("eps");
  const std::optional<double> momentum =
      c.at("momentum").is_null() ? std::nullopt : std::optional<double>(c.at("momentum").get<double>());
  const bool affine = c.at("affine"), track = c.at("track_running_stats");
  if (c.at("kind") == "BatchNorm1d") return std::make_shared<BatchNorm1d>(n, eps, momentum, affine, track);
  return std::make_shared<BatchNorm2d>(n, eps, momentum, affine, track);
}

void check_close(const Tensor& got, const json& want, const char* what) {
  INFO(what);
  const Tensor w = fixture_tensor(want);
  REQUIRE(got.shape() == w.shape());
  CHECK(allclose(got, w, 1e-4, 1e-5));
}

void replay(const std::string& name) {
  const json& c = fixture_case(fixture(), name);
  auto bn = make(c);
  if (c.at("affine")) {
    bn->weight().copy_(fixture_tensor(c.at("weight")));
    bn->bias().copy_(fixture_tensor(c.at("bias")));
  }
  int step_nr = 0;
  for (const json& step : c.at("steps")) {
    INFO("step " << step_nr++);
    bn->zero_grad();
    Tensor x = fixture_tensor(step.at("x"));
    autograd::set_requires_grad(x);
    const Tensor y = bn->forward(x);
    autograd::backward(autograd::sum(autograd::mul(y, fixture_tensor(step.at("g")))));
    check_close(y, step.at("y"), "output");
    check_close(autograd::grad(x), step.at("grad_x"), "input gradient");
    if (c.at("affine")) {
      check_close(autograd::grad(bn->weight()), step.at("grad_weight"), "weight gradient");
      check_close(autograd::grad(bn->bias()), step.at("grad_bias"), "bias gradient");
    }
    if (c.at("track_running_stats")) {
      check_close(bn->running_mean(), step.at("running_mean"), "running_mean");
      check_close(bn->running_var(), step.at("running_var"), "running_var");
      CHECK(bn->num_batches_tracked().item().to_int() == step.at("num_batches_tracked").get<int64_t>());
    }
  }
  bn->eval();
  check_close(bn->forward(fixture_tensor(c.at("eval").at("x"))), c.at("eval").at("y"), "eval output");
  std::vector<std::string> keys;
  for (const auto& [k, v] : bn->state_dict()) keys.push_back(k);
  CHECK(keys == c.at("state_dict_keys").get<std::vector<std::string>>());
}

TEST_CASE("BatchNorm1d replays torch: [N, C] and [N, C, L] inputs, momentum 0.1 and 0.5", "[nn][batch_norm]") {
  replay("bn1d_2d");
  replay("bn1d_3d");
}

TEST_CASE("BatchNorm2d replays torch: momentum, cumulative average, no affine, no running stats",
          "[nn][batch_norm]") {
  replay("bn2d");
  replay("bn2d_cumulative");
  replay("bn2d_no_affine");
  replay("bn1d_no_running");
}

TEST_CASE("BatchNorm: the sync references are BatchNorm2d on the whole batch", "[nn][batch_norm]") {
  replay("sync_w2");
  replay("sync_w3");
}

TEST_CASE("BatchNorm: repr, input checks and the one-value-per-channel refusal", "[nn][batch_norm]") {
  BatchNorm2d bn(4);
  CHECK(bn.to_string() == "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n");
  BatchNorm1d none(3, 1e-3, std::nullopt, false, false);
  CHECK(none.to_string() == "BatchNorm1d(3, eps=0.001, momentum=None, affine=False, track_running_stats=False)\n");
  CHECK(none.parameters().empty());
  CHECK(none.buffers().empty());
  CHECK_THROWS_WITH(bn.forward(zeros({2, 4, 3})), Contains("BatchNorm2d: expected 4D input (got 3D input)"));
  CHECK_THROWS_WITH(BatchNorm1d(4).forward(zeros({2, 4, 3, 3})), Contains("expected 2D or 3D input (got 4D input)"));
  CHECK_THROWS_WITH(bn.forward(zeros({2, 3, 2, 2})), Contains("has 3 channels (dim 1), the module normalises 4"));
  CHECK_THROWS_WITH(BatchNorm1d(4).forward(zeros({1, 4})),
                    Contains("Expected more than 1 value per channel when training, got input size [1, 4]"));
  CHECK_THROWS_WITH(BatchNorm1d(0), Contains("num_features must be positive"));
  // Eval mode uses the running statistics, so one sample is fine.
  BatchNorm1d one(4);
  one.eval();
  CHECK(one.forward(ones({1, 4})).shape() == Shape{1, 4});
}

// A group of one rank: gathering and reducing are identities.
class LoneSync : public BatchNormSync {
 public:
  Tensor all_gather(const Tensor& local) override { return local.unsqueeze(0); }
  void all_reduce_sum(const Tensor&) override {}
  int size() const override { return 1; }
  int rank() const override { return 0; }
  std::string describe() const override { return "group 'solo' (rank 0 of 1)"; }
};

TEST_CASE("SyncBatchNorm: training in a group of one rank is refused, eval works", "[nn][batch_norm]") {
  BatchNorm2d bn(2);
  bn.set_sync(std::make_shared<LoneSync>());
  CHECK(bn.to_string() == "SyncBatchNorm(2, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n");
  CHECK_THROWS_WITH(bn.forward(ones({2, 2, 2, 2})),
                    Contains("SyncBatchNorm: forward in training on group 'solo' (rank 0 of 1), a group of one rank"));
  bn.eval();
  CHECK(bn.forward(ones({2, 2, 2, 2})).shape() == Shape{2, 2, 2, 2});
  bn.set_sync(nullptr);
  CHECK(bn.type_name() == "BatchNorm2d");
}

}  // namespace
}  // namespace braid::nn
