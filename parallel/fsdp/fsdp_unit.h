// FSDPUnit: the state fully_shard() attaches to one module — its parameters, how they are sharded, and the
// buffers it gathers and reduces them with.
//
// Parameters (see docs/FSDP.md for the whole life of a step):
//   * Between steps each managed parameter handle of the module holds this rank's unpadded shard (rows of
//     dim 0; ShardLayout says which). So module.parameters(), optimizers, state_dict() and .grad all see
//     shards, and an optimizer built on them keeps sharded state.
//   * unshard() all-gathers every parameter into the unit's UnshardedStorage and points the handles at
//     their full views (Tensor::set_data keeps autograd state); reshard() points them back at the shards.
//   * Gradients: while the unit's forward runs, each parameter that requires grad is made to look like
//     the output of one PostBackwardNode per forward (its grad_fn), so every use of it in forward sends
//     its full gradient to that node. The node reduce-scatters the full gradients (one collective per
//     unit), averages them, reshards, and hands the shard gradients on to each parameter's own
//     AccumulateGrad — .grad (or a GradSink) gets a shard, accumulating across steps as usual.
//   * The pre-backward hook sits on the forward outputs' gradients: it unshards again when forward had
//     resharded, before any op of the unit runs backward, if backward needs the parameters at all.
//   * Backward reads the gathered parameters only through the tensors forward saved of them, which a
//     SavedUseCounter counts. When the last one is dropped (LinearBackward drops its weight before
//     computing the weight's gradient) the unit reshards at once, so the gathered parameters and the
//     full gradients never coexist; with none saved, backward does not gather. The node's reshard is
//     then a no-op. retain_graph keeps the saved tensors, and the node reshards as before.
//
// Collectives happen on the thread running forward/backward, in an order fixed by the module structure
// and the autograd engine's deterministic order, so every rank issues the same sequence on the group.
//
// Thread-safety: one forward/backward at a time (as nn::Module).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/process_group.h"
#include "nn/module.h"
#include "parallel/fsdp/fsdp_options.h"
#include "parallel/fsdp/shard_layout.h"
#include "parallel/fsdp/unsharded_storage.h"

namespace braid::parallel::fsdp {

using nn::TensorList;

class SavedUseCounter;

class FSDPUnit : public std::enable_shared_from_this<FSDPUnit> {
 public:
  // Takes over `params` (name relative to the module, handle); changes nothing yet. Use fully_shard(),
  // which also checks the group and the other ranks, registers the unit and installs the hooks.
  FSDPUnit(nn::Module& module, std::string name, std::vector<std::pair<std::string, Tensor>> params,
           std::shared_ptr<collectives::ProcessGroup> group, FSDPOptions options);
  ~FSDPUnit();
  FSDPUnit(const FSDPUnit&) = delete;
  FSDPUnit& operator=(const FSDPUnit&) = delete;

  const std::string& name() const { return name_; }
  nn::Module& module() const { return module_; }
  const FSDPOptions& options() const { return options_; }
  const std::shared_ptr<collectives::ProcessGroup>& group() const { return group_; }
  const ShardLayout& layout() const { return layout_; }
  // The device the unit computes on: its parameters' device at fully_shard time (CPU for a unit without
  // parameters). The shards live there too, or in host memory with options().offload_params.
  const Device& device() const { return device_; }
  const Device& shard_device() const { return shard_device_; }
  bool is_sharded() const { return options_.strategy != ShardingStrategy::NO_SHARD; }
  // Whether the parameter handles currently hold full tensors.
  bool is_unsharded() const { return unsharded_; }
  // Whether an all-gather was issued (prefetch) and not yet waited for.
  bool is_unshard_pending() const { return unshard_pending_; }
  // The managed parameters, in layout order, as (name relative to the unit's module, handle).
  const std::vector<std::pair<std::string, Tensor>>& managed_parameters() const { return params_; }

  // Replaces each parameter by this rank's shard (once, from fully_shard; no-op for NO_SHARD).
  void shard_parameters();
  // All-gathers the parameters (no-op when already full, or NO_SHARD); collective over the group.
  // unshard() = start_unshard() (copy-in, issue) + finish_unshard() (wait, point the handles at the
  // full views); prefetching issues early and the unit's own pre-forward finishes.
  void unshard();
  void start_unshard();
  void finish_unshard();
  // Points the parameters back at their shards and gives the gathered memory back (no communication).
  void reshard();
  // While unsharded: copies this rank's rows of the full parameters into its shards (after the full
  // parameters were edited, e.g. loaded from a full state dict). No communication.
  void write_back_shards();

  // Hook bodies (public for the node and the hooks fully_shard installs).
  void pre_forward(TensorList& inputs);
  void post_forward(TensorList& outputs);
  void pre_backward();
  // Whether backward still reads the gathered parameters: some tensor saved in forward aliases them.
  bool needs_params_in_backward() const;
  // The node's work: full gradients (undefined for an unused parameter) in, shard gradients out.
  TensorList post_backward(const TensorList& full_grads);

 private:
  void reduce_scatter_grads(const TensorList& full_grads, TensorList& out);
  bool reduces_in_place(size_t i, const Tensor& grad) const;
  void allreduce_grads(const TensorList& full_grads, TensorList& out);
  void detach_from_node();
  void saved_uses_gone() noexcept;
  void record_and_prefetch();
  void finish_recording();
  std::string describe() const;

  nn::Module& module_;
  std::string name_;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::shared_ptr<collectives::ProcessGroup> group_;
  FSDPOptions options_;
  ShardLayout layout_;
  int rank_ = 0;
  int world_ = 1;
  DType dtype_ = DType::Float32;          // of the parameters and their shards
  DType param_dtype_ = DType::Float32;    // of the gathered parameters (mixed precision)
  DType reduce_dtype_ = DType::Float32;   // of the gradient reduction
  Device device_ = Device::cpu();
  Device shard_device_ = Device::cpu();   // device_, or the host with offload_params

  bool unsharded_ = false;
  bool unshard_pending_ = false;
  std::vector<std::shared_ptr<collectives::Work>> pending_gathers_;
  // forward_prefetch: the unit whose forward came next in the recorded order; the root records it.
  std::weak_ptr<FSDPUnit> next_forward_;
  std::weak_ptr<FSDPUnit> previous_forward_;  // backward_prefetch: the unit whose backward comes next
  bool is_root_forward_ = false;
  bool order_recorded_ = false;
  std::vector<std::weak_ptr<FSDPUnit>> forward_order_;  // root only, while recording
  bool node_attached_ = false;      // parameters carry this forward's node as grad_fn
  std::vector<Tensor> shards_;      // the shard each handle held before unshard()
  // Reused across steps (a fresh allocation costs page faults every step).
  std::optional<UnshardedStorage> unsharded_storage_;
  // Counts the tensors saved in forward that alias unsharded_storage_ (made with it).
  std::shared_ptr<SavedUseCounter> saved_uses_;
  bool in_forward_ = false;   // between pre_forward and post_forward
  bool in_backward_ = false;  // from the pre-backward hook to the next forward that is not a recompute
  Tensor gather_input_;   // one padded block, this rank's shards, while an all-gather is in flight
  Tensor allreduce_buffer_;  // NO_SHARD: every full gradient, flat
};

}  // namespace braid::parallel::fsdp
