#include "dist_autograd/context_state.h"

#include "base/check.h"
#include "tensor/sparse.h"

namespace braid::dist_autograd {

namespace {
thread_local std::shared_ptr<ContextState> t_current;
// Context ids: the starting worker's id in the high 16 bits, a per-process counter in the low 48.
constexpr int kWorkerIdShift = 48;
constexpr uint64_t kLocalIdMask = (uint64_t{1} << kWorkerIdShift) - 1;
// How many released ids a worker remembers to refuse stragglers (16 bytes each, with the set's node).
constexpr size_t kRememberReleased = 4096;
}  // namespace

Tensor ContextGradSink::accumulate(const Tensor& leaf, const Tensor& grad) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = index_.try_emplace(leaf.unsafe_impl(), entries_.size());
  if (fresh) {
    // The entry must own its buffer, since later gradients add into it in place. A gradient that nothing
    // else references (the usual case: AccumulateGrad's fresh result of the producing rule) is taken as it
    // is, as .grad does (autograd/accumulate_grad.cc): copying it put a 4 MiB pass per Linear(1024, 1024)
    // on the owner's critical path before d x left. One shared with another leaf, a hook, a view or a DDP
    // bucket is copied.
    const bool sole = grad.is_sparse() || (grad.use_count() == 1 && grad.storage().use_count() == 1 &&
                                           grad.autograd_meta() == nullptr && grad.is_contiguous() &&
                                           grad.storage()->nbytes() == grad.nbytes());
    entries_.push_back(GradientEntry{leaf, sole ? grad : grad.clone()});
  } else {
    Tensor& slot = entries_[it->second].grad;
    // Dense into dense in place: whoever holds the entry (DDP writes its averaged result into it) keeps
    // seeing the context's value.
    if (!slot.is_sparse() && !grad.is_sparse() && slot.dtype() == grad.dtype()) slot.add_(grad);
    else slot = add_maybe_sparse(slot, grad);
  }
  return entries_[it->second].grad;
}

GradientMap ContextGradSink::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return GradientMap(entries_);
}

void ContextState::add_known_worker(int worker) {
  std::lock_guard<std::mutex> lock(mu_);
  known_workers_.insert(worker);
}

std::vector<int> ContextState::known_workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {known_workers_.begin(), known_workers_.end()};
}

void ContextState::add_send_function(int64_t message_id, std::shared_ptr<SendRpcBackward> send) {
  std::lock_guard<std::mutex> lock(mu_);
  sends_.emplace(message_id, std::move(send));
}

std::shared_ptr<SendRpcBackward> ContextState::send_function(int64_t message_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sends_.find(message_id);
  return it == sends_.end() ? nullptr : it->second;
}

void ContextState::begin_backward(bool retain_graph) {
  std::lock_guard<std::mutex> lock(mu_);
  BRAID_CHECK_ARG(!graph_consumed_,
                  "dist_autograd.backward: Trying to backward through the graph a second time in context {} (its "
                  "previous backward ran without retain_graph=true)", id_);
  graph_consumed_ = !retain_graph;
}

ContextTable& ContextTable::instance() {
  static ContextTable table;
  return table;
}

std::shared_ptr<ContextState> ContextTable::create(int worker_id) {
  BRAID_CHECK_ARG(worker_id >= 0 && worker_id < (1 << 15), "dist_autograd: worker id {} does not fit a context id",
                  worker_id);
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t local = ++next_local_ & kLocalIdMask;
  const auto id = static_cast<int64_t>((static_cast<uint64_t>(worker_id) << kWorkerIdShift) | local);
  auto state = std::make_shared<ContextState>(id);
  const bool inserted = contexts_.emplace(id, state).second;
  BRAID_CHECK_TYPED(InternalError, inserted, "dist_autograd: context id {} is in use already", id);
  return state;
}

std::shared_ptr<ContextState> ContextTable::get_or_create(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  BRAID_CHECK_ARG(released_.count(id) == 0,
                  "Could not find autograd context with id: {} (it was released on this worker; a message of it "
                  "arrived late)", id);
  auto& slot = contexts_[id];
  if (!slot) slot = std::make_shared<ContextState>(id);
  return slot;
}

std::shared_ptr<ContextState> ContextTable::find(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(id);
  return it == contexts_.end() ? nullptr : it->second;
}

std::shared_ptr<ContextState> ContextTable::retrieve(int64_t id) const {
  auto state = find(id);
  BRAID_CHECK_ARG(state != nullptr, "Could not find autograd context with id: {}", id);
  return state;
}

std::shared_ptr<ContextState> ContextTable::erase(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return nullptr;
  auto state = std::move(it->second);
  contexts_.erase(it);
  if (released_.insert(id).second) {
    released_order_.push_back(id);
    if (released_order_.size() > kRememberReleased) {
      released_.erase(released_order_.front());
      released_order_.pop_front();
    }
  }
  return state;
}

std::vector<std::shared_ptr<ContextState>> ContextTable::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<ContextState>> out;
  out.reserve(contexts_.size());
  for (const auto& [id, state] : contexts_) out.push_back(state);
  return out;
}

size_t ContextTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return contexts_.size();
}

std::shared_ptr<ContextState> current_context_state() { return t_current; }

CurrentContextScope::CurrentContextScope(std::shared_ptr<ContextState> state) : prev_(std::move(t_current)) {
  t_current = std::move(state);
}

CurrentContextScope::~CurrentContextScope() { t_current = std::move(prev_); }

}  // namespace braid::dist_autograd
