// DDP with a CUDA module over a one-rank NCCL group: bucket buffers live on the GPU, the reduction runs
// through NCCL, and the gradients equal a plain local backward (one rank averages over itself), with and
// without gradient_as_bucket_view, over the bucket rebuild. Skips, saying so, without a GPU.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_NCCL

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "parallel/ddp/ddp.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/random.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

// Elementwise layers: relu(w1 * x + b1) * w2.
class TwoLayers : public nn::Module {
 public:
  explicit TwoLayers(uint64_t seed) : nn::Module("TwoLayers") {
    Generator gen(seed);
    w1 = register_parameter("w1", randn({16}, {}, &gen));
    b1 = register_parameter("b1", randn({16}, {}, &gen));
    w2 = register_parameter("w2", randn({16}, {}, &gen));
  }
  Tensor forward(const Tensor& x) override {
    return autograd::mul(autograd::relu(autograd::add(autograd::mul(w1, x), b1)), w2);
  }
  Tensor w1, b1, w2;
};

TEST_CASE("ddp: a CUDA module over NCCL gives the local gradients", "[gpu][ddp]") {
  if (gpu_test::no_gpu()) return;
  for (bool as_view : {false, true}) {
    INFO("gradient_as_bucket_view " << as_view);
    auto model = std::make_shared<TwoLayers>(5);
    auto reference = std::make_shared<TwoLayers>(5);
    model->to(Device::cuda(0));
    reference->to(Device::cuda(0));
    parallel::DDPOptions o;
    o.process_group = gpu_test::one_rank_nccl_group(as_view ? "ddp-gpu-view" : "ddp-gpu");
    o.device_ids = {Device::cuda(0)};
    o.gradient_as_bucket_view = as_view;
    parallel::DistributedDataParallel ddp(model, o);
    for (int it = 0; it < 3; ++it) {
      Generator gen(100 + static_cast<uint64_t>(it));
      const Tensor x = randn({32, 16}, {}, &gen).cuda(0);
      model->zero_grad();
      reference->zero_grad();
      autograd::backward(autograd::sum(ddp.forward(x)));
      autograd::backward(autograd::sum(reference->forward(x)));
      const auto got = model->parameters();
      const auto want = reference->parameters();
      for (size_t i = 0; i < got.size(); ++i) {
        const Tensor g = autograd::grad(got[i]);
        REQUIRE(g.defined());
        CHECK(g.is_cuda());
        CHECK(allclose(g.cpu(), autograd::grad(want[i]).cpu(), 1e-5, 1e-6));
      }
    }
    CHECK(ddp.logging_data().rebuilds == 1);
  }
}

}  // namespace
}  // namespace braid

#endif  // BRAID_HAVE_NCCL
