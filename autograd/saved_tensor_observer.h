// Saved-tensor observers: a way to learn which tensors autograd keeps for backward, and when it lets each
// of them go.
//
// Like PyTorch's saved_tensors_hooks, but observing only (the saved tensor is kept as it is): while an
// observer is installed on a thread, every SavedTensor made on that thread asks it for a token and keeps
// that token exactly as long as it keeps the tensor: until its node is released after backward (or
// releases it early, see SavedTensors::release), or the graph is dropped. A token's destruction is the
// signal. FSDP counts the saved aliases of a unit's gathered parameters this way, to give the gathered
// memory back as soon as backward no longer needs it (parallel/fsdp/saved_use_counter.h).
//
// Only tensors saved through SavedTensor are seen: a backward rule must reach forward tensors through its
// saved list (as PyTorch's save_for_backward), not through values captured by its closure.
//
// Thread-safety: installation is per thread; tokens may be destroyed on any thread.
#pragma once

#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace braid::autograd {

class SavedTensorObserver {
 public:
  virtual ~SavedTensorObserver() = default;
  // Called on the thread saving `t` (defined). Returns the token to keep with it, or nullptr when the
  // observer is not interested in `t`.
  virtual std::shared_ptr<void> on_saved(const Tensor& t) = 0;
  // Called when activation checkpointing (checkpoint.h) records a node that will run its function again in
  // backward, reading then whatever it reads (parameters included) without having saved it. The token is
  // kept while the node can still recompute. Default: not interested.
  virtual std::shared_ptr<void> on_checkpoint() { return nullptr; }
};

// Installs `observer` on this thread until remove_saved_tensor_observer (held weakly: an observer that is
// gone is skipped and forgotten). Installing one that is already installed does nothing.
void add_saved_tensor_observer(const std::shared_ptr<SavedTensorObserver>& observer);
// Uninstalls `observer` from this thread; does nothing when it is not installed.
void remove_saved_tensor_observer(const SavedTensorObserver* observer);

namespace detail {
// The tokens of this thread's observers for a tensor being saved (SavedTensor's constructor).
std::vector<std::shared_ptr<void>> observe_saved(const Tensor& t);
// The tokens of this thread's observers for a checkpoint node being recorded.
std::vector<std::shared_ptr<void>> observe_checkpoint();
}  // namespace detail

}  // namespace braid::autograd
