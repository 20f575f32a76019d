// DistributedOptimizer: one optimizer step over parameters spread across workers, driven by the gradients
// of a distributed-autograd context, as torch.distributed.optim.DistributedOptimizer.
//
//   std::vector<rpc::RRef> params = remote_layer.remote_parameters();
//   params.push_back(rpc::RRef::local(rpc::Value(local_layer->weight())));   // local ones work too
//   DistributedOptimizer opt(nn::optim::SGDOptions{.lr = 0.05}, params);
//   {
//     dist_autograd::Context ctx;
//     ... forward through remote and local layers ...
//     dist_autograd::backward(ctx.id(), {loss});
//     opt.step(ctx.id());          // every owner updates its parameters from its gradients of ctx
//   }
//
// Construction checks the options here, groups the RRefs by owner (in order of first appearance) and
// creates, on each owner, a LocalOptimizer (local_optimizer.h) over that owner's parameters, in parallel,
// waiting for all of them: a bad RRef or options fail the constructor, naming the owner.
//
// step(context_id) runs every owner's optimizer in parallel (one rpc_async each), each with its own
// gradients of that context (the gradients stay where they are; nothing but the context id travels), and
// returns when all are done. If any failed, it throws RemoteError naming the first failed worker (and
// listing the others) after waiting for the rest, so that no step is still running when it returns.
// Parameters that got no gradient in the context are left unchanged. Called inside the context's scope
// (the usual way), the step RPC itself joins every owner to the context, so an owner none of whose
// parameters took part simply does nothing (PyTorch fails there); a context an owner does not hold
// (unknown, or released) fails with "Could not find autograd context with id: N".
//
// step(context_id, turn) is the same step taken in turn, when several DistributedOptimizers (one per
// trainer, each with its own optimizer state) step the same parameters: each owner applies the steps in the
// order step_order.h describes (per step and micro-batch: once every participant has submitted its own, in
// participant order), and each owner's reply, hence this call, comes once every participant of the
// micro-batch has stepped there. The order is kept where the parameters live, with no other process asked.
//
// The owners' optimizers live as long as this object (their RRefs are released with it).
// Thread-safety: step() may be called from several threads (each owner serialises its steps).
#pragma once

#include <cstdint>
#include <vector>

#include "dist_autograd/local_optimizer.h"
#include "dist_autograd/step_order.h"
#include "rpc/rref.h"

namespace braid::dist_autograd {

class DistributedOptimizer {
 public:
  // InvalidArgument for an empty list, a null RRef or invalid options; the owner's error (RemoteError
  // naming it) when its optimizer cannot be made (e.g. an RRef that does not hold a floating tensor, or the
  // same parameter twice).
  DistributedOptimizer(OptimizerOptions options, const std::vector<rpc::RRef>& params);

  void step(int64_t context_id);
  // The step of participant turn.participant for (turn.step, turn.microbatch), in its turn on every owner.
  void step(int64_t context_id, const StepTurn& turn);

  const OptimizerOptions& options() const { return options_; }
  // The owners, in the order their optimizers were made.
  std::vector<rpc::WorkerInfo> owners() const;
  // The RRefs of the owners' LocalOptimizers (parallel to owners()).
  const std::vector<rpc::RRef>& remote_optimizers() const { return optimizers_; }

 private:
  OptimizerOptions options_;
  std::vector<rpc::RRef> optimizers_;
};

}  // namespace braid::dist_autograd
