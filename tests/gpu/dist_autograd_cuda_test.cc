// Distributed autograd with CUDA tensors: RPC carries them as CPU copies, and their gradients come back
// to the GPU. One worker calling itself (the path is the same as between processes). Skips, saying so,
// without a GPU.
#include <catch2/catch.hpp>

#include <mutex>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "dist_autograd/context.h"
#include "rpc/api.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

TEST_CASE("dist_autograd: the gradient of a CUDA tensor sent through RPC lands on its GPU", "[gpu][dist_autograd]") {
  if (gpu_test::no_gpu()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    rpc::global_registry().add_function("gpu_da.mul", [](const rpc::Args& a) -> rpc::Value {
      return autograd::mul(a.at(0).as_tensor(), a.at(1).as_tensor());
    });
  });
  rpc::RpcBackendOptions o;
  o.store = std::make_shared<store::HashStore>();
  o.rpc_timeout = rpc::Millis(20'000);
  rpc::init_rpc("worker0", 0, 1, o);
  {
    Tensor x = from_vector<float>({1, 2, 3}, {3}).cuda();
    autograd::set_requires_grad(x);
    const Tensor c = from_vector<float>({4, 5, 6}, {3});
    dist_autograd::Context ctx;
    const Tensor y = rpc::rpc_sync("worker0", "gpu_da.mul", {rpc::Value(x), rpc::Value(c)}).as_tensor();
    CHECK_FALSE(y.is_cuda());  // results travel as CPU tensors
    dist_autograd::backward(ctx.id(), {autograd::sum(y)});
    const Tensor g = dist_autograd::get_gradients(ctx.id()).at(x);
    CHECK(g.is_cuda());
    CHECK(equal(g.cpu(), c));
  }
  rpc::shutdown(true);
}

}  // namespace
}  // namespace braid
