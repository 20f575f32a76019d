#include "tests/mp/dist_autograd/da_ddp_trainer.h"

#include <mutex>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "dist_autograd/context.h"
#include "nn/linear.h"
#include "parallel/ddp/ddp.h"
#include "rpc/api.h"
#include "tensor/factory.h"

namespace braid::mp {

namespace {

using rpc::Args;
using rpc::Value;
using rpc::ValueList;
using nn::TensorList;

std::mutex g_mu;
std::shared_ptr<collectives::ProcessGroup> g_trainer_group;  // GUARDED_BY(g_mu)

std::shared_ptr<collectives::ProcessGroup> trainer_group() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_trainer_group;
}

std::shared_ptr<nn::Linear> get_linear(int64_t in, int64_t out) {
  auto l = std::make_shared<nn::Linear>(in, out, /*bias=*/false);
  std::vector<float> w(static_cast<size_t>(in * out), 1.0f);
  w[0] = -1.0f;
  autograd::NoGradGuard no_grad;
  l->weight().copy_(from_vector(w, {out, in}));
  return l;
}

// The torch test's HybridModel: forward({dense, sparse}) through RemoteEM, fc1, RemoteNet and fc2 (or a DDP of
// fc2 in INSIDE mode).
class HybridModel : public nn::Module {
 public:
  HybridModel(rpc::RRef em, rpc::RRef net, std::shared_ptr<collectives::ProcessGroup> inside_group)
      : nn::Module("HybridModel"), em_(std::move(em)), net_(std::move(net)) {
    fc1 = register_module("fc1", get_linear(2, 2));
    fc2 = register_module("fc2", get_linear(3, 1));
    if (inside_group) {
      parallel::DDPOptions o;
      o.process_group = std::move(inside_group);
      o.check_reduction = true;
      fc2_ddp = std::make_shared<parallel::DistributedDataParallel>(fc2, o);
    }
  }
  TensorList forward_many(const TensorList& in) override {
    const Tensor sparse = em_.rpc_sync().call("forward", {Value(in.at(1))}).as_tensor();
    const Tensor dense = fc1->forward(in.at(0));
    const Tensor x = net_.rpc_sync().call("forward", {Value(autograd::cat({dense, sparse}, 1))}).as_tensor();
    return {fc2_ddp ? fc2_ddp->forward(x) : fc2->forward(x)};
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<parallel::DistributedDataParallel> fc2_ddp;

 private:
  rpc::RRef em_, net_;
};

struct DdpTrainer {
  DdpTrainer(rpc::RRef em, rpc::RRef net, DdpMode mode) {
    auto group = mode == DdpMode::kNone ? nullptr : trainer_group();
    hybrid = std::make_shared<HybridModel>(std::move(em), std::move(net), mode == DdpMode::kInside ? group : nullptr);
    switch (mode) {
      case DdpMode::kNone: non_ddp_params = {hybrid->fc1->weight(), hybrid->fc2->weight()}; break;
      case DdpMode::kInside:
        ddp_params = {hybrid->fc2->weight()};
        non_ddp_params = {hybrid->fc1->weight()};
        break;
      case DdpMode::kOutside: {
        ddp_params = {hybrid->fc1->weight(), hybrid->fc2->weight()};
        parallel::DDPOptions o;
        o.process_group = group;
        o.check_reduction = true;
        outside = std::make_shared<parallel::DistributedDataParallel>(hybrid, o);
        break;
      }
    }
  }

  // The torch test's Trainer.train_batch: [grads of DDP params, grads of non-DDP params] of the last micro-batch.
  Value train_batch(const Tensor& dense, const Tensor& sparse, const Tensor& values, bool less_inputs, bool uneven) {
    std::vector<std::pair<Tensor, Tensor>> batches{{dense, sparse}};
    if (uneven) {
      batches = {{dense.slice(0, 0, 2), sparse.slice(0, 0, 2)}, {dense.slice(0, 2, 4), sparse.slice(0, 2, 4)}};
      if (less_inputs) batches.resize(1);
    }
    std::optional<parallel::DistributedDataParallel::Join> join;
    if (uneven) join.emplace(*outside, /*divide_by_initial_world_size=*/true, /*enable=*/true);
    ValueList ddp_grads, other_grads;
    for (const auto& [d, s] : batches) {
      dist_autograd::Context ctx;
      nn::Module& model = outside ? static_cast<nn::Module&>(*outside) : *hybrid;
      const Tensor output = model.forward_many({d, s}).at(0);
      dist_autograd::backward(ctx.id(), {autograd::sum(autograd::mul(output, values))});
      const auto grads = dist_autograd::get_gradients(ctx.id());
      ddp_grads.clear();
      other_grads.clear();
      for (const auto& p : ddp_params) ddp_grads.push_back(grads.at(p));
      for (const auto& p : non_ddp_params) other_grads.push_back(grads.at(p));
    }
    return ValueList{Value(ddp_grads), Value(other_grads)};
  }

  std::shared_ptr<HybridModel> hybrid;
  std::shared_ptr<parallel::DistributedDataParallel> outside;
  std::vector<Tensor> ddp_params, non_ddp_params;
};

}  // namespace

void set_trainer_group(std::shared_ptr<collectives::ProcessGroup> group) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_trainer_group = std::move(group);
}

void register_ddp_trainer() {
  static std::once_flag once;
  std::call_once(once, [] {
    rpc::global_registry()
        .add_class<DdpTrainer>("da.DdpTrainer")
        .constructor([](const Args& a) {
          return std::make_shared<DdpTrainer>(a.at(0).as_rref(), a.at(1).as_rref(),
                                              static_cast<DdpMode>(a.at(2).as_int()));
        })
        .method("train_batch", [](DdpTrainer& t, const Args& a) -> Value {
          return t.train_batch(a.at(0).as_tensor(), a.at(1).as_tensor(), a.at(2).as_tensor(), a.at(3).as_bool(),
                               a.at(4).as_bool());
        });
  });
}

}  // namespace braid::mp
