// DDP's built-in comm hooks on CUDA buckets (issue 7: the hooks run "on CPU tensors and, when built with
// CUDA, on GPU tensors"). A CUDA module under DDP over a one-rank NCCL group registers each hook; the same
// model on the CPU under DDP over a one-rank in-process engine (exact: it leaves the data as it is)
// registers the same hook. Over four steps the CUDA gradients must equal the CPU ones: the hook did the
// same arithmetic on the GPU (casts, scaling, min/max quantization, PowerSGD's compression with its
// matrix products in cuBLAS). For the lossy hooks the CPU result must also differ from the plain
// local gradient, so the comparison shows that the hook ran. Skips, saying so, without a GPU.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_NCCL

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "parallel/ddp/ddp.h"
#include "parallel/ddp/default_hooks.h"
#include "parallel/ddp/powersgd_hook.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/random.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/collectives_registry/fake_engine.h"

namespace braid {
namespace {

// Elementwise layers: relu(w * x + b) * w with a 2-D w, so that PowerSGD has a
// matrix to compress ([8, 16] at rank 1: 128 numbers become 24).
class Elementwise2D : public nn::Module {
 public:
  explicit Elementwise2D(uint64_t seed) : nn::Module("Elementwise2D") {
    Generator gen(seed);
    w = register_parameter("w", randn({8, 16}, {}, &gen));
    b = register_parameter("b", randn({16}, {}, &gen));
  }
  Tensor forward(const Tensor& x) override {
    return autograd::mul(autograd::relu(autograd::add(autograd::mul(w, x), b)), w);
  }
  Tensor w, b;
};

struct HookCase {
  std::string name;
  std::function<parallel::NamedCommHook(std::shared_ptr<collectives::ProcessGroup>)> make;
  bool lossy;
  double rtol, atol;
};

std::vector<HookCase> hook_cases() {
  parallel::PowerSGDOptions psgd;
  psgd.matrix_approximation_rank = 1;
  psgd.start_powersgd_iter = 2;  // steps 0-1 allreduce, steps 2-3 compress (error feedback, warm start)
  psgd.random_seed = 7;
  // Quantization: a device's min/max and rounding may put a value one step away from the CPU's; one step
  // is (max - min) / 255 of gradients of order 1, so 0.05 covers it with room.
  return {
      {"allreduce", [](auto g) { return parallel::allreduce_hook(g); }, false, 1e-6, 1e-7},
      {"fp16_compress", [](auto g) { return parallel::fp16_compress_hook(g); }, true, 1e-6, 1e-7},
      {"bf16_compress", [](auto g) { return parallel::bf16_compress_hook(g); }, true, 1e-6, 1e-7},
      {"quantize_per_tensor", [](auto g) { return parallel::quantize_per_tensor_hook(g); }, true, 0, 0.05},
      {"quantize_per_channel", [](auto g) { return parallel::quantize_per_channel_hook(g, 16); }, true, 0, 0.05},
      {"noop", [](auto) { return parallel::noop_hook(); }, false, 1e-6, 1e-7},
      {"powersgd",
       [psgd](auto g) { return parallel::powersgd_hook(std::make_shared<parallel::PowerSGDState>(g, psgd)); }, true,
       1e-5, 1e-6},
  };
}

TEST_CASE("ddp: built-in comm hooks on CUDA buckets compute what they compute on the CPU", "[gpu][ddp]") {
  if (gpu_test::no_gpu()) return;
  for (const HookCase& c : hook_cases()) {
    INFO("hook " << c.name);
    auto gpu_model = std::make_shared<Elementwise2D>(5);
    auto cpu_model = std::make_shared<Elementwise2D>(5);
    Elementwise2D local(5);  // no DDP: the gradients a lossless hook must reproduce
    gpu_model->to(Device::cuda(0));

    parallel::DDPOptions gpu_options;
    gpu_options.process_group = gpu_test::one_rank_nccl_group("ddp-hooks-" + c.name);
    gpu_options.device_ids = {Device::cuda(0)};
    parallel::DistributedDataParallel gpu_ddp(gpu_model, gpu_options);
    gpu_ddp.register_comm_hook(c.make(gpu_options.process_group));

    parallel::DDPOptions cpu_options;
    cpu_options.process_group =
        collectives::testing::fake_group(0, 1, "ddp-hooks-cpu-" + c.name, std::make_shared<store::HashStore>());
    parallel::DistributedDataParallel cpu_ddp(cpu_model, cpu_options);
    cpu_ddp.register_comm_hook(c.make(cpu_options.process_group));

    bool differs_from_local = false;
    for (int step = 0; step < 4; ++step) {
      INFO("step " << step);
      Generator gen(100 + static_cast<uint64_t>(step));
      const Tensor x = randn({4, 8, 16}, {}, &gen);
      gpu_model->zero_grad();
      cpu_model->zero_grad();
      local.zero_grad();
      autograd::backward(autograd::sum(gpu_ddp.forward(x.cuda(0))));
      autograd::backward(autograd::sum(cpu_ddp.forward(x)));
      autograd::backward(autograd::sum(local.forward(x)));
      const auto gpu_params = gpu_model->parameters();
      const auto cpu_params = cpu_model->parameters();
      const auto local_params = local.parameters();
      for (size_t i = 0; i < gpu_params.size(); ++i) {
        const Tensor g = autograd::grad(gpu_params[i]);
        const Tensor want = autograd::grad(cpu_params[i]);
        REQUIRE(g.defined());
        REQUIRE(want.defined());
        CHECK(g.is_cuda());
        CHECK(allclose(g.cpu(), want, c.rtol, c.atol));
        const Tensor plain = autograd::grad(local_params[i]);
        if (!c.lossy) CHECK(allclose(want, plain, 1e-6, 1e-7));
        if (!allclose(want, plain, 1e-6, 1e-7)) differs_from_local = true;
      }
    }
    if (c.lossy) CHECK(differs_from_local);
  }
}

}  // namespace
}  // namespace braid

#endif  // BRAID_HAVE_NCCL
