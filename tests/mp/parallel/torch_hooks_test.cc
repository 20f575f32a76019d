// Every built-in comm hook that PyTorch 1.13 runs on the CPU, registered with register_comm_hook on a 2- and
// 3-rank DDP, against torch's own numbers: tests/fixtures/ddp_hook_reference.json (written by
// tests/fixtures/make_ddp_hook_fixtures.py) holds the model's weights, every rank's batches, and per hook,
// step and rank the gradients DDP left and the parameters after SGD. Tolerances are those of torch's
// hook tests (test_ddp_hooks / test_c10d_gloo): exact-algorithm hooks rtol 1e-5; fp16 compression a float16
// ulp (see the case).
// powersgd runs where torch's random matrices do not matter (no gradient worth compressing at rank 4, with
// error feedback and warm start on). torch's quantization hooks need CUDA, its bf16 hook NCCL, and its
// batched PowerSGD fails an assertion in 1.13: those, and post-local SGD before its switch, run through DDP
// the same way and are compared with torch's allreduce run at what their compression loses (their exact
// arithmetic is checked in comm_hooks_test.cc and batched_powersgd_test.cc).
#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp/ddp.h"
#include "parallel/ddp/default_hooks.h"
#include "parallel/ddp/powersgd_hook.h"
#include "parallel/local_sgd/post_local_sgd.h"
#include "tensor/compare.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tests/mp/support/mp_test.h"
#include "tests/support/torch_fixture.h"

using namespace braid;
using namespace braid::mp;
using nlohmann::json;

namespace {

const json& fixture() {
  static const json doc = testing::load_torch_fixture("ddp_hook_reference.json");
  return doc;
}

Tensor values_as(const json& v, const Shape& shape) {
  return from_vector(v.get<std::vector<double>>(), shape).to(DType::Float32);
}

std::shared_ptr<nn::Sequential> make_model() {
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(6, 3)});
  const auto named = m->named_parameters();
  const json& params = fixture().at("params");
  REQUIRE(named.size() == params.size());
  for (size_t i = 0; i < named.size(); ++i) {
    REQUIRE(named[i].first == params[i].at("name").get<std::string>());
    named[i].second.copy_(testing::fixture_tensor(params[i]));
  }
  return m;
}

parallel::NamedCommHook hook_named(const std::string& name, const std::shared_ptr<ProcessGroup>& pg) {
  if (name == "allreduce") return parallel::allreduce_hook(pg);
  if (name == "fp16_compress") return parallel::fp16_compress_hook(pg);
  if (name == "bf16_compress") return parallel::bf16_compress_hook(pg);
  if (name == "quantize_per_tensor") return parallel::quantize_per_tensor_hook(pg);
  if (name == "quantize_per_channel") return parallel::quantize_per_channel_hook(pg, 16);
  if (name == "noop") return parallel::noop_hook();
  if (name == "post_localsgd") {
    // Past start_localSGD_iter 3 never: the global average throughout, as allreduce.
    return parallel::post_localsgd_hook(std::make_shared<parallel::PostLocalSGDState>(pg, nullptr, 3));
  }
  parallel::PowerSGDOptions o;
  o.matrix_approximation_rank = 4;
  o.start_powersgd_iter = 2;
  o.min_compression_rate = 2;
  if (name == "batched_powersgd") {
    o.matrix_approximation_rank = 8;  // the padded square of the 51 gradients is 8x8: exact
    return parallel::batched_powersgd_hook(std::make_shared<parallel::PowerSGDState>(pg, o));
  }
  return parallel::powersgd_hook(std::make_shared<parallel::PowerSGDState>(pg, o));
}

// Runs `hook` through DDP and compares with torch's run of `reference` (itself, or allreduce for the
// hooks torch 1.13 cannot run on the CPU).
void replay(MpFixture& f, const std::string& hook, double rtol, double atol, const std::string& reference = {}) {
  INFO("hook " << hook << ", " << f.size() << " ranks");
  const std::string world = std::to_string(f.size());
  const json& run = fixture().at("runs").at(world).at(static_cast<size_t>(f.rank())).at(reference.empty() ? hook : reference);
  const json& inputs = fixture().at("inputs").at(world).at(static_cast<size_t>(f.rank()));
  auto model = make_model();
  parallel::DDPOptions o;
  o.process_group = f.shared_group();
  parallel::DistributedDataParallel ddp(model, o);
  ddp.register_comm_hook(hook_named(hook, f.shared_group()));
  nn::optim::SGDOptions so;
  so.lr = fixture().at("lr");
  nn::optim::SGD opt(model->parameters(), so);
  const auto params = model->parameters();
  for (size_t step = 0; step < run.size(); ++step) {
    INFO("step " << step);
    opt.zero_grad();
    const Tensor x = values_as(inputs.at(step).at("x"), {2, 4});
    const Tensor y = values_as(inputs.at(step).at("y"), {2, 3});
    autograd::backward(autograd::mse_loss(ddp.forward(x), y));
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor want = values_as(run.at(step).at("grads").at(i), params[i].shape());
      INFO("gradient of parameter " << i << ": max |braid - torch| "
                                    << braid::amax(braid::abs(braid::sub(autograd::grad(params[i]), want))).item<double>());
      CHECK(allclose(autograd::grad(params[i]), want, rtol, atol));
    }
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i << " after the step");
      CHECK(allclose(params[i], values_as(run.at(step).at("params").at(i), params[i].shape()), rtol, atol));
    }
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "torch hooks: allreduce, fp16_compress, noop and powersgd replay torch's DDP",
                 "[ddp][hook][torch]") {
  if (size() != 2 && size() != 3) {
    WARN("the fixture has 2 and 3 ranks");
    return;
  }
  replay(*this, "allreduce", 1e-5, 1e-6);
  replay(*this, "noop", 1e-5, 1e-6);
  replay(*this, "powersgd", 1e-5, 1e-6);
  // torch's gloo adds float16 buffers in float16, rounding at every step of its ring; braid adds them in
  // float32 and rounds once: the two differ by up to a float16 ulp of the sums (2^-10 relative).
  replay(*this, "fp16_compress", 2e-3, 1e-3);
}

TEST_CASE_METHOD(MpFixture, "torch hooks: the hooks torch cannot run on the CPU, against torch's allreduce run",
                 "[ddp][hook][torch]") {
  if (size() != 2 && size() != 3) {
    WARN("the fixture has 2 and 3 ranks");
    return;
  }
  // Tolerances: what each compression loses on gradients of order 0.1-1 (bfloat16 keeps 8 bits; uint8
  // quantization a 255th of each rank's range), summed over three steps of lr 0.1.
  replay(*this, "bf16_compress", 1e-2, 1e-2, "allreduce");
  replay(*this, "quantize_per_tensor", 0, 2e-2, "allreduce");
  replay(*this, "quantize_per_channel", 0, 2e-2, "allreduce");
  replay(*this, "batched_powersgd", 1e-4, 1e-5, "allreduce");
  replay(*this, "post_localsgd", 1e-5, 1e-6, "allreduce");
}
