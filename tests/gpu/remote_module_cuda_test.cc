// RemoteModule on a CUDA device (issue 6: "worker0/cuda:0"): the owner moves the module to its GPU, a
// forward moves the CPU input there and the output back, distributed autograd's backward gives the GPU
// parameter its gradient in the owner's context, and a DistributedOptimizer steps the GPU parameter.
// One worker calling itself (the path is the same as between processes). Values against a hand
// computation. Skips, saying so, without a GPU.
#include <catch2/catch.hpp>

#include <mutex>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "dist_autograd/context.h"
#include "dist_autograd/dist_optimizer.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/module_registry.h"
#include "dist_autograd/remote_module.h"
#include "rpc/api.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

// y = x * w, with w = (1, 2, 3, 4).
class Scale : public nn::Module {
 public:
  Scale() : nn::Module("Scale") { w = register_parameter("w", from_vector<float>({1, 2, 3, 4}, {4})); }
  Tensor forward(const Tensor& x) override { return autograd::mul(x, w); }
  Tensor w;
};

TEST_CASE("dist_autograd: a RemoteModule on a GPU runs forward, backward and an optimizer step there",
          "[gpu][dist_autograd]") {
  if (gpu_test::no_gpu()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    dist_autograd::register_module_class("gpu_test.Scale",
                                         [](const rpc::Args&) { return std::make_shared<Scale>(); });
  });
  rpc::RpcBackendOptions o;
  o.store = std::make_shared<store::HashStore>();
  o.rpc_timeout = rpc::Millis(20'000);
  rpc::init_rpc("worker0", 0, 1, o);
  {
    dist_autograd::RemoteModule layer("worker0/cuda:0", "gpu_test.Scale");
    CHECK(layer.device().is_cuda());
    const auto module = dist_autograd::local_module(layer.module_rref());
    const Tensor w = module->parameters().at(0);
    CHECK(w.is_cuda());  // the owner moved the module to its GPU

    const Tensor x = from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {4});
    nn::optim::SGDOptions sgd;
    sgd.lr = 0.1;
    dist_autograd::DistributedOptimizer optimizer(sgd, layer.remote_parameters());
    {
      dist_autograd::Context ctx;
      const Tensor y = layer(x);
      CHECK_FALSE(y.is_cuda());  // outputs come back to the CPU
      CHECK(equal(y, from_vector<float>({0.5f, -2.0f, 6.0f, 1.0f}, {4})));
      dist_autograd::backward(ctx.id(), {autograd::sum(y)});
      const auto grads = dist_autograd::get_gradients(ctx.id());
      REQUIRE(grads.contains(w));
      const Tensor g = grads.at(w);
      CHECK(g.is_cuda());
      CHECK(equal(g.cpu(), x));  // d sum(x * w) / dw = x
      optimizer.step(ctx.id());
    }
    CHECK(w.is_cuda());
    CHECK(allclose(w.cpu(), from_vector<float>({0.95f, 2.1f, 2.8f, 3.975f}, {4}), 1e-6, 1e-7));
  }
  rpc::shutdown(true);
}

}  // namespace
}  // namespace braid
