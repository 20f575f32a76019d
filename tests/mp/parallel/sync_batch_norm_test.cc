// SyncBatchNorm across processes against PyTorch: tests/fixtures/batch_norm_reference.json holds a
// BatchNorm2d run on the whole batch of W ranks (rank r holding r + 1 samples of it), which is what a
// SyncBatchNorm over the W ranks must compute (torch's test_DistributedDataParallel_SyncBatchNorm rests on
// the same equality). Each rank checks its slice of the output and of the input gradient, the running
// statistics, and that the ranks' parameter gradients sum to the whole batch's. Then
// convert_sync_batchnorm on a model, and the refusals.
#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "parallel/norm/sync_batch_norm.h"
#include "tensor/compare.h"
#include "tests/mp/support/mp_test.h"
#include "tests/support/torch_fixture.h"

using namespace braid;
using namespace braid::mp;
using nlohmann::json;
using testing::fixture_tensor;
using Catch::Contains;

namespace {

const json& fixture() {
  static const json doc = testing::load_torch_fixture("batch_norm_reference.json");
  return doc;
}

void check_close(const Tensor& got, const Tensor& want, const char* what) {
  INFO(what << ": got " << got.describe() << ", want " << want.describe());
  REQUIRE(got.shape() == want.shape());
  CHECK(allclose(got.cpu(), want, 1e-4, 1e-5));
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "SyncBatchNorm: equals torch's BatchNorm2d on the whole batch (uneven batches)",
                 "[sync_batch_norm]") {
  if (size() > 4) {
    WARN("the fixture covers 2 to 4 ranks");
    return;
  }
  auto pg = shared_group();
  const json& c = testing::fixture_case(fixture(), fmt::format("sync_w{}", size()));
  const auto rows = c.at("rows_of_rank").at(static_cast<size_t>(rank()));
  const int64_t first = rows.at(0), count = rows.at(1);
  auto bn = parallel::make_sync_batch_norm(3, pg, 1e-5, 0.2);
  CHECK(bn->type_name() == "SyncBatchNorm");
  bn->to(device());
  bn->weight().copy_(dev(fixture_tensor(c.at("weight"))));
  bn->bias().copy_(dev(fixture_tensor(c.at("bias"))));
  int nr = 0;
  for (const json& step : c.at("steps")) {
    INFO("step " << nr++);
    bn->zero_grad();
    Tensor x = dev(fixture_tensor(step.at("x")).narrow(0, first, count).contiguous());
    autograd::set_requires_grad(x);
    const Tensor g = dev(fixture_tensor(step.at("g")).narrow(0, first, count).contiguous());
    const Tensor y = bn->forward(x);
    autograd::backward(autograd::sum(autograd::mul(y, g)));
    check_close(y, fixture_tensor(step.at("y")).narrow(0, first, count), "output slice");
    check_close(autograd::grad(x), fixture_tensor(step.at("grad_x")).narrow(0, first, count), "input gradient slice");
    // The parameters' gradients are this rank's share: summed over the group they are the whole batch's.
    TensorList gw{autograd::grad(bn->weight()).clone()};
    TensorList gb{autograd::grad(bn->bias()).clone()};
    finish(pg->allreduce(gw));
    finish(pg->allreduce(gb));
    check_close(gw[0], fixture_tensor(step.at("grad_weight")), "weight gradient (summed)");
    check_close(gb[0], fixture_tensor(step.at("grad_bias")), "bias gradient (summed)");
    check_close(bn->running_mean(), fixture_tensor(step.at("running_mean")), "running_mean");
    check_close(bn->running_var(), fixture_tensor(step.at("running_var")), "running_var");
    CHECK(bn->num_batches_tracked().cpu().item().to_int() == step.at("num_batches_tracked").get<int64_t>());
  }
  // Eval mode uses the running statistics: no communication, torch's output.
  bn->eval();
  const uint64_t seq = pg->sequence_number();
  check_close(bn->forward(dev(fixture_tensor(c.at("eval").at("x")))), fixture_tensor(c.at("eval").at("y")), "eval");
  CHECK(pg->sequence_number() == seq);
}

TEST_CASE_METHOD(MpFixture, "convert_sync_batchnorm: a model's batch norms synchronise in place",
                 "[sync_batch_norm]") {
  auto pg = shared_group();
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(4, 3));
  auto bn = std::make_shared<nn::BatchNorm1d>(3);
  model->push_back(bn);
  const auto keys_before = model->state_dict();
  CHECK(parallel::convert_sync_batchnorm(*model, pg) == 1);
  CHECK(bn->type_name() == "SyncBatchNorm");
  CHECK(model->state_dict().size() == keys_before.size());
  // Every rank feeds one row of the same 2-row-per-rank batch; the synced statistics are the whole batch's,
  // so the running mean is the same on every rank although the local rows differ.
  Generator gen(3);
  const Tensor whole = randn({2 * size(), 4}, {}, &gen);
  model->to(device());
  (void)model->forward(dev(whole.narrow(0, 2 * rank(), 2).contiguous()));
  TensorList mean{bn->running_mean().clone()};
  TensorList summed{mean[0].clone()};
  finish(pg->allreduce(summed));
  check_close(braid::div(summed[0], double(size())), mean[0].cpu(), "running_mean equal on every rank");
}

TEST_CASE_METHOD(MpFixture, "SyncBatchNorm: bad input is refused naming the module and the group",
                 "[sync_batch_norm][checks]") {
  auto pg = shared_group();
  auto bn = parallel::make_sync_batch_norm(3, pg);
  bn->to(device());
  CHECK_THROWS_WITH(bn->forward(dev(zeros({3}))), Contains("SyncBatchNorm: expected at least 2D input (got 1D input)"));
  CHECK_THROWS_WITH(bn->forward(dev(zeros({2, 4}))), Contains("has 4 channels"));
  // One value per channel on every rank is still more than one over the group: only a group total of 1
  // is refused, and ranks agree on it because they see the same gathered counts.
  const Tensor y = bn->forward(dev(ones({1, 3})));
  CHECK(y.shape() == Shape{1, 3});
  CHECK_THROWS_WITH(parallel::make_sync_batch_norm(3, nullptr), Contains("the process group is null"));
}
