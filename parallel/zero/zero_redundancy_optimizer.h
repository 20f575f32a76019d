// torch.distributed.optim.ZeroRedundancyOptimizer: the optimizer's state sharded over a process group.
// Each parameter belongs to one rank (torch's greedy partition: parameters by size, largest first, each to
// the rank with the fewest elements so far); each rank keeps a local optimizer over its own parameters
// only, so it holds 1/W of the state. step() updates the local parameters from their .grad (averaged
// already, by DDP) and then broadcasts every parameter from its owner, one fused broadcast per owner and
// dtype, so that every rank ends the step with the same parameters as plain DDP + the same optimizer.
//
//   ZeroRedundancyOptimizer zero(model->named_parameters(),
//       [](std::vector<Tensor> p, std::vector<std::string> names) { return std::make_unique<SGD>(...); }, group);
//   ... backward through DDP ...; zero.step();
//   zero.consolidate_state_dict(0);      // every rank: rank 0 receives every rank's share
//   if (rank == 0) save(zero.state_dict());
//
// Thread-safety: used from one thread per rank, every rank calling step(), consolidate_state_dict() and
// load_state_dict() in the same order (they communicate).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/process_group.h"
#include "nn/optim/optimizer.h"

namespace braid::parallel {

class ZeroRedundancyOptimizer {
 public:
  // Makes the local optimizer over this rank's parameters (and their names, for messages).
  using LocalOptimizerFactory =
      std::function<std::unique_ptr<nn::optim::Optimizer>(std::vector<Tensor> params, std::vector<std::string> names)>;

  ZeroRedundancyOptimizer(const std::vector<std::pair<std::string, Tensor>>& named_params,
                          const LocalOptimizerFactory& make_local, std::shared_ptr<collectives::ProcessGroup> group);

  // The local optimizer's step on this rank's parameters, then every parameter from its owner.
  void step();
  // Clears (or zeroes) the .grad of every parameter, not only the local ones.
  void zero_grad(bool set_to_none = true);

  // The rank that owns parameter `index` (in the order given to the constructor).
  int owner_of(size_t index) const { return owner_[index]; }
  // This rank's parameters, as indices into the constructor's list, in the local optimizer's order.
  const std::vector<size_t>& local_indices() const { return local_; }
  nn::optim::Optimizer& local_optimizer() { return *local_optimizer_; }
  size_t num_params() const { return params_.size(); }
  double lr() const { return local_optimizer_->lr(); }
  void set_lr(double lr) { local_optimizer_->set_lr(lr); }

  // Collective: every rank's share of the state goes to rank `to`, which can then call state_dict().
  void consolidate_state_dict(int to = 0);
  // The whole optimizer's state by global parameter index (torch's layout), on the rank consolidated to.
  nn::optim::OptimizerStateDict state_dict() const;
  // Every rank takes its own parameters' share of a whole state dict (one from state_dict()).
  void load_state_dict(const nn::optim::OptimizerStateDict& dict);

 private:
  void broadcast_from_owners();

  std::shared_ptr<collectives::ProcessGroup> group_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<int> owner_;
  std::vector<size_t> local_;
  std::unique_ptr<nn::optim::Optimizer> local_optimizer_;
  std::optional<nn::optim::OptimizerStateDict> consolidated_;
};

// torch's partition: indices sorted by numel (largest first, ties by index), each to the rank whose share
// has the fewest elements (the lowest rank on ties). Returns each parameter's owner.
std::vector<int> partition_parameters(const std::vector<Tensor>& params, int world_size);

}  // namespace braid::parallel
