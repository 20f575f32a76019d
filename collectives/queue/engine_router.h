// EngineRouter: runs each engine primitive on the engine the policy chooses (engine_policy.h): the
// two-level engine first when there is one and the policy says so, then the local (shared-memory) engine
// when the policy says so, and the network engine when neither runs it (not chosen, or declined). Every
// choice is logged at debug level on "braid.collectives".
//
// Thread-safety: as Engine (one op per lane at a time).
#pragma once

#include <memory>
#include <vector>

#include "collectives/core/engine.h"
#include "collectives/queue/engine_policy.h"

namespace spdlog {
class logger;
}

namespace braid::collectives {

class EngineRouter {
 public:
  // `local` and `hier` may be null. Every engine must outlive the router.
  EngineRouter(Engine& network, Engine* local, EnginePolicy policy, Engine* hier = nullptr);

  Engine& network() const { return network_; }
  Engine* local() const { return local_; }
  Engine* hier() const { return hier_; }
  const EnginePolicy& policy() const { return policy_; }

  void broadcast(Tensor& buffer, int root, const OpContext& ctx);
  void allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx);
  void allreduce_coalesced(Tensor& flat, EngineOp op, const OpContext& ctx);
  void reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx);
  void allgather(const Tensor& input, Tensor& output, const OpContext& ctx);
  void gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx);
  void scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx);
  void reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx);
  void alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                const std::vector<int64_t>& recv_offsets, const OpContext& ctx);
  void barrier(const OpContext& ctx);

 private:
  // Whether the local engine runs `op` first (logging the choice when debug logging is on).
  bool local_first(const OpTraits& op, const OpContext& ctx) const;
  // Whether the two-level engine runs `op` first (logged like local_first).
  bool hier_first(const OpTraits& op, const OpContext& ctx) const;
  // The op went to the next engine after `engine` declined it (logged at debug level).
  void declined(const OpContext& ctx, const Engine* engine) const;

  Engine& network_;
  Engine* local_;
  const EnginePolicy policy_;
  Engine* hier_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace braid::collectives
