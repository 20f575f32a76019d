#include "parallel/fsdp/saved_use_counter.h"

namespace braid::parallel::fsdp {

SavedUseCounter::SavedUseCounter(const Storage* storage, std::function<void()> on_none_left)
    : storage_(storage), on_none_left_(std::move(on_none_left)) {}

std::shared_ptr<void> SavedUseCounter::on_saved(const Tensor& t) {
  return t.storage().get() == storage_ ? use() : nullptr;
}

std::shared_ptr<void> SavedUseCounter::use() {
  live_.fetch_add(1);
  // The token may outlive the unit (a graph kept after the module is gone): it holds the counter weakly.
  std::weak_ptr<SavedUseCounter> weak = weak_from_this();
  return std::shared_ptr<void>(static_cast<void*>(this), [weak](void*) {
    if (auto counter = weak.lock()) counter->dropped();
  });
}

void SavedUseCounter::dropped() {
  if (live_.fetch_sub(1) == 1 && on_none_left_) on_none_left_();
}

}  // namespace braid::parallel::fsdp
