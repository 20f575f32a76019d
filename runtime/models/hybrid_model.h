// The hybrid parameter-server model of torch's ddp_under_dist_autograd_test.py (DdpUnderDistAutogradTest),
// the model kind "hybrid":
//
//   RemoteEM(num_embeddings, embedding_dim, sparse)   on a worker: EmbeddingBag, mode mean, weight all 0.5;
//                                                     forward(indices [B]) puts each index in its own bag
//   RemoteNet(d_in, d_out)                            on a worker: relu(hybrid_linear(d_in, d_out)(x))
//   HybridModel                                       on each trainer: fc1 = hybrid_linear(d_dense, d_dense),
//                                                     fc2 = hybrid_linear(d_hid, d_out);
//                                                     forward({dense [B, d_dense], sparse [B] int64}) =
//                                                     fc2(net(cat(fc1(dense), em(sparse))))
//   hybrid_linear(i, o)                               torch's getLinear: a bias-free Linear, weight all ones
//                                                     except w[0][0] = -1
//
// Parameters are fixed by the torch test, so model.init_seed does not change them. The trainer's parameters
// are named "fc1.weight" and "fc2.weight" also when ddp.mode inside wraps fc2 (the DDP wrapper runs in fc2's
// place but is not registered as a child). The workers' modules name theirs "em.weight" (RemoteEM) and
// "fc.weight" (RemoteNet), as the torch test's attributes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "dist_autograd/remote_module.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace braid::runtime {

// Registers "braid.RemoteEM" and "braid.RemoteNet" as dist_autograd module classes, once per process
// (later calls do nothing). The model registry calls it when first used; a worker must have it done (or
// have used the registry) before its RPC agent starts, so that the driver's RemoteModules find them.
void register_hybrid_module_classes();

// hybrid_linear(i, o): see above.
std::shared_ptr<nn::Linear> hybrid_linear(int64_t in_features, int64_t out_features);

class HybridModel : public nn::Module {
 public:
  // `wrap_inside`, when set, receives fc2 and returns the module to run in its place (DDP of fc2).
  HybridModel(std::shared_ptr<dist_autograd::RemoteModule> em, std::shared_ptr<dist_autograd::RemoteModule> net,
              int64_t d_dense, int64_t d_hid, int64_t d_out,
              const std::function<std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>)>& wrap_inside = nullptr);

  // {dense [B, d_dense] float, sparse [B] int64} -> {[B, d_out]}.
  nn::TensorList forward_many(const nn::TensorList& inputs) override;
  // Keeps the wrapper (not a child) in the same mode.
  void train(bool on = true) override;

  const std::shared_ptr<nn::Linear>& fc1() const { return fc1_; }
  const std::shared_ptr<nn::Linear>& fc2() const { return fc2_; }
  // What runs in fc2's place: the wrapper with ddp.mode inside, else fc2.
  const std::shared_ptr<nn::Module>& fc2_runner() const { return fc2_runner_; }

 private:
  std::shared_ptr<dist_autograd::RemoteModule> em_;
  std::shared_ptr<dist_autograd::RemoteModule> net_;
  std::shared_ptr<nn::Linear> fc1_;
  std::shared_ptr<nn::Linear> fc2_;
  std::shared_ptr<nn::Module> fc2_runner_;
};

}  // namespace braid::runtime
