// SavedUseCounter: how many tensors saved for backward still alias one unit's gathered parameters.
//
// Installed as a saved-tensor observer (autograd/saved_tensor_observer.h) while the unit's forward runs,
// it hands a token to every saved tensor that aliases the unit's UnshardedStorage (a parameter, its
// transpose, any view). Each backward rule drops its tokens when its node is released, or earlier where
// the rule releases the tensor itself (LinearBackward, before it computes the weight's gradient). When
// the count falls to zero, nothing left in the graph reads the gathered parameters: the unit can give
// them back before its gradients arrive, or not gather them for backward at all (a first layer, whose
// input needs no gradient, saves no weight). A checkpoint recorded inside the forward counts as a use
// until its node is released: its recomputation reads the parameters without having saved them.
//
// Thread-safety: the count is atomic; the callback runs on the thread that drops the last token.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "autograd/saved_tensor_observer.h"

namespace braid::parallel::fsdp {

class SavedUseCounter final : public autograd::SavedTensorObserver,
                              public std::enable_shared_from_this<SavedUseCounter> {
 public:
  // `storage`: the storage whose aliases are counted; `on_none_left`: called each time the count falls
  // to zero.
  SavedUseCounter(const Storage* storage, std::function<void()> on_none_left);

  std::shared_ptr<void> on_saved(const Tensor& t) override;
  // A checkpoint inside the unit's forward reads the parameters again when it recomputes: a use.
  std::shared_ptr<void> on_checkpoint() override { return use(); }
  // Saved tensors that alias the storage and are still kept.
  int64_t live() const { return live_.load(); }

 private:
  std::shared_ptr<void> use();
  void dropped();

  const Storage* storage_;
  std::function<void()> on_none_left_;
  std::atomic<int64_t> live_{0};
};

}  // namespace braid::parallel::fsdp
