#include "autograd/saved_tensor_observer.h"

#include <algorithm>

namespace braid::autograd {
namespace {
thread_local std::vector<std::weak_ptr<SavedTensorObserver>> t_observers;
}  // namespace

void add_saved_tensor_observer(const std::shared_ptr<SavedTensorObserver>& observer) {
  if (observer == nullptr) return;
  for (const auto& w : t_observers) {
    if (w.lock() == observer) return;
  }
  t_observers.push_back(observer);
}

void remove_saved_tensor_observer(const SavedTensorObserver* observer) {
  std::erase_if(t_observers, [observer](const std::weak_ptr<SavedTensorObserver>& w) {
    auto o = w.lock();
    return o == nullptr || o.get() == observer;
  });
}

namespace detail {
namespace {
template <typename Ask>
std::vector<std::shared_ptr<void>> collect_tokens(Ask ask) {
  std::vector<std::shared_ptr<void>> tokens;
  if (t_observers.empty()) return tokens;
  // A copy: an observer may install or remove observers while it runs.
  const auto observers = t_observers;
  for (const auto& w : observers) {
    if (auto o = w.lock()) {
      if (auto token = ask(*o)) tokens.push_back(std::move(token));
    }
  }
  return tokens;
}
}  // namespace

std::vector<std::shared_ptr<void>> observe_saved(const Tensor& t) {
  return collect_tokens([&t](SavedTensorObserver& o) { return o.on_saved(t); });
}

std::vector<std::shared_ptr<void>> observe_checkpoint() {
  return collect_tokens([](SavedTensorObserver& o) { return o.on_checkpoint(); });
}
}  // namespace detail

}  // namespace braid::autograd
