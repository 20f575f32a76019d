// GlooEngine: the Gloo engine (Debian's libgloo, TCP transport; core/engine.h).
//
// Bootstrap: through the group's braid Store (BackendOptions.store, already prefixed per group), one gloo
// context per device (BackendOptions.devices, interface names; default: gloo_devices.h default_interface;
// at most one per lane), connected full-mesh, with keys under "gloo/context<c>/"; send/recv get one more
// context ("gloo/p2p/", on the next device). The lanes (BackendOptions.threads, torch's `threads`, default 2) share the
// contexts round-robin, lane i on context i mod contexts, as torch's worker threads do. Construction ends
// with a gloo barrier on every context, so a returned group is fully connected on every rank (torch's
// _create_process_group_gloo runs a barrier for the same reason); that barrier uses no sequence number.
//
// Collectives run on lane ctx.lane's context (the group runs op n on lane n mod lanes on every rank), as
// gloo's new-style collectives with the op's sequence number as tag, which keeps concurrent ops on one
// context apart, and the time left before the op's deadline as timeout. reduce_scatter is our own
// (reduce_scatter.h: a ring, or one direct exchange); send/recv are in gloo_p2p.h. gloo errors become
// TimeoutError/CommError naming the op (gloo_errors.h).
//
// Destruction: the group drains and joins its lanes before it destroys the engine (while the contexts still
// exist); the destructor stops the p2p waiters, then the contexts go.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/core/backend_options.h"
#include "collectives/core/engine.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}

namespace braid::collectives {

namespace gloo {
class DeadlineWatchdog;
class GlooP2P;
class Scratch;
}  // namespace gloo

class GlooEngine final : public Engine {
 public:
  // Connects every context (collective over the group's ranks: each must construct its group).
  explicit GlooEngine(const BackendOptions& options);
  ~GlooEngine() override;

  std::string_view name() const override { return "gloo"; }
  int lanes() const override;

  bool broadcast(Tensor& buffer, int root, const OpContext& ctx) override;
  bool allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) override;
  bool reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) override;
  bool allgather(const Tensor& input, Tensor& output, const OpContext& ctx) override;
  bool gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) override;
  bool scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) override;
  bool reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) override;
  bool alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                const std::vector<int64_t>& recv_offsets, const OpContext& ctx) override;
  bool barrier(const OpContext& ctx) override;
  void post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                 std::shared_ptr<Work> work) override;
  void post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) override;
  bool reduces(DType dtype) const override;

 private:
  struct LaneContext;

  void connect(const BackendOptions& options);
  // Rendezvous of one context through the group's store under `prefix`; its pairs wait at most
  // pair_timeout (gloo's registered buffers; unbound ones get each op's own).
  std::shared_ptr<::gloo::Context> connect_context(const std::string& prefix, size_t device_index, Millis pair_timeout,
                                                   const Deadline& deadline);
  LaneContext& lane(const OpContext& ctx);
  // Before the registered exchanges close: each rank says it is done and waits briefly to hear the same
  // (gloo's registered buffers report a closed connection before data that already arrived).
  void part_registered_exchanges() noexcept;

  std::vector<std::unique_ptr<LaneContext>> lane_contexts_;
  std::shared_ptr<::gloo::Context> p2p_context_;
  std::unique_ptr<gloo::GlooP2P> p2p_;
  int rank() const { return shape_.rank; }
  int size() const { return shape_.size; }
  const std::string& group_name() const { return shape_.name; }

  const GroupShape shape_;
  const Millis timeout_;
  const int lanes_;
  std::shared_ptr<store::Store> store_;
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices_;
  // Last: destroyed (joined) first, before the lanes whose exchanges it aborts.
  std::unique_ptr<gloo::DeadlineWatchdog> watchdog_;
};

// The engine of the "gloo" backend (composed into a group by collectives/registry/engine_factory.h).
std::unique_ptr<Engine> make_gloo_engine(const BackendOptions& options);

}  // namespace braid::collectives
