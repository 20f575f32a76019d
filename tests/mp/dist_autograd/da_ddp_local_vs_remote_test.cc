// PyTorch's DdpComparisonTest.test_ddp_dist_autograd_local_vs_remote on every rank of the job: a RemoteModule
// Linear(10, 5, no bias) on worker0 feeds a DDP-wrapped Linear(5, 1) over the default group. The same model
// built locally (layer1 with the remote module's weight) and run with plain autograd must give the same
// gradients as the distributed pass: layer2's .grad equals its entry in the context (DDP reduced into the
// context there), and layer1's .grad equals the remote owner's context gradient of its weight.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "collectives/registry/group_registry.h"
#include "dist_autograd/context.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/remote_module.h"
#include "nn/linear.h"
#include "parallel/ddp/ddp.h"
#include "rpc/api.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/random.h"
#include "tests/mp/dist_autograd/remote_module_mp.h"
#include "tests/mp/rpc/rpc_mp.h"
#include "tests/mp/support/default_group.h"

namespace braid::mp {

using rpc::Value;

TEST_CASE_METHOD(MpFixture, "dist_autograd + DDP: local vs remote (test_ddp_dist_autograd_local_vs_remote)",
                 "[dist_autograd][ddp][remote_module]") {
  register_remote_module_test_classes();
  DefaultGroupScope group(*this);  // the torch test's init_process_group("gloo", ...)
  {
    RpcJob job(*this);
    // Each rank its own seed: otherwise inputs and gradients agree everywhere and DDP's average hides a
    // missing reduction.
    manual_seed(static_cast<uint64_t>(rank()) + 1);
    for (const std::string remote_device : {"worker0/cpu", "worker0"}) {
      INFO("remote_device " << remote_device << ", rank " << rank());
      dist_autograd::RemoteModule remote_layer1(remote_device, "nn.Linear",
                                                {Value(int64_t{10}), Value(int64_t{5}), Value(false)});
      auto layer1 = std::make_shared<nn::Linear>(10, 5, /*bias=*/false);
      layer1->load_state_dict(dist_autograd::state_dict_of(remote_layer1.module_rref().to_here()));
      auto layer2 = std::make_shared<nn::Linear>(5, 1);
      const Tensor inputs = rand({10, 10});
      parallel::DDPOptions o;
      o.process_group = collectives::default_group();
      parallel::DistributedDataParallel ddp_model(layer2, o);

      // The local pass: .grad of both layers.
      autograd::backward({autograd::sum(ddp_model.forward(layer1->forward(inputs)))});

      // The distributed pass: the same model with layer1 on worker0.
      dist_autograd::Context ctx;
      const Tensor loss = autograd::sum(ddp_model.forward(remote_layer1(inputs)));
      dist_autograd::backward(ctx.id(), {loss});
      const dist_autograd::GradientMap grads = dist_autograd::get_gradients(ctx.id());
      collectives::default_group()->barrier()->wait();

      const Tensor local_w2 = autograd::grad(layer2->weight());
      REQUIRE(local_w2.defined());
      CHECK(equal(local_w2, grads.at(layer2->weight())));
      CHECK(equal(autograd::grad(layer2->bias()), grads.at(layer2->bias())));
      const rpc::ValueList remote = rpc::rpc_sync("worker0", "rm.context_grads",
                                                  {Value(remote_layer1.module_rref()), Value(ctx.id())})
                                        .items();
      REQUIRE(remote.size() == 1);
      const Tensor local_w1 = autograd::grad(layer1->weight());
      REQUIRE(local_w1.defined());
      CHECK(equal(local_w1, remote.at(0).as_tensor()));
      // And the reduction did happen: layer2's gradient is the average over the ranks of each rank's own
      // d sum(layer2(h)) / d W2 = column sums of h = layer1(inputs), which differ from rank to rank.
      Tensor own;
      {
        autograd::NoGradGuard no_grad;
        own = sum(layer1->forward(inputs), {0}, /*keepdim=*/true);
      }
      collectives::TensorList summed{own.clone()};
      collectives::default_group()->allreduce(summed)->wait();
      CHECK(allclose(local_w2, div(summed[0], static_cast<double>(size())), 1e-5, 1e-6));
      if (size() > 1) CHECK_FALSE(allclose(local_w2, own, 1e-5, 1e-6));
    }
    job.shutdown(true);
  }
}

}  // namespace braid::mp
