// The public API of dist_autograd/context.h: contexts, gradients, and the backward pass of the worker
// that starts one. The other workers' parts run in rpc_hooks.cc (propagate_gradients).
#include "dist_autograd/context.h"

#include <fmt/format.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "base/logging.h"
#include "dist_autograd/context_state.h"
#include "dist_autograd/release.h"
#include "dist_autograd/rpc_hooks.h"
#include "dist_autograd/send_recv.h"
#include "rpc/api.h"

namespace braid::dist_autograd {

Context::Context() {
  ensure_installed();
  BRAID_CHECK_ARG(current_context_state() == nullptr,
                  "dist_autograd::Context: Already have an autograd context id for this thread (context {})",
                  current_context_id());
  state_ = ContextTable::instance().create(rpc::current_agent().self().id);
  id_ = state_->id();
  scope_ = std::make_unique<CurrentContextScope>(state_);
}

Context::~Context() {
  scope_.reset();
  state_.reset();
  try {
    // This worker's state goes now; the other workers' releases are confirmed in the background.
    const auto backpressure = rpc::is_initialized() ? rpc::current_agent().default_timeout() : rpc::Millis(5000);
    PendingReleases::instance().track(id_, release_everywhere(id_, -1), backpressure);
  } catch (const std::exception& e) {
    logging::get("braid.dist_autograd")->warn("releasing distributed autograd context {} on the other workers failed: {}",
                                              id_, e.what());
  }
}

void wait_for_releases(std::chrono::milliseconds timeout) { PendingReleases::instance().wait_all(timeout); }

int64_t current_context_id() {
  auto state = current_context_state();
  return state ? state->id() : -1;
}

GradientMap::GradientMap(std::vector<GradientEntry> entries) : entries_(std::move(entries)) {
  index_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].tensor.unsafe_impl(), i);
}

const Tensor* GradientMap::find(const Tensor& tensor) const {
  auto it = index_.find(tensor.unsafe_impl());
  return it == index_.end() ? nullptr : &entries_[it->second].grad;
}

const Tensor& GradientMap::at(const Tensor& tensor) const {
  const Tensor* g = find(tensor);
  if (g == nullptr) {
    const auto* m = autograd::meta(tensor);
    const std::string name = m != nullptr && !m->name.empty() ? m->name : tensor.describe();
    BRAID_THROW(InvalidArgument, "dist_autograd: the context holds no gradient for {} ({} gradients held)", name,
                entries_.size());
  }
  return *g;
}

GradientMap get_gradients(int64_t context_id) { return ContextTable::instance().retrieve(context_id)->sink().snapshot(); }

void backward(int64_t context_id, const std::vector<Tensor>& roots, bool retain_graph) {
  auto ctx = ContextTable::instance().retrieve(context_id);
  BRAID_CHECK_ARG(!roots.empty(), "dist_autograd.backward: no roots given (context {})", context_id);
  for (size_t i = 0; i < roots.size(); ++i) {
    BRAID_CHECK_ARG(roots[i].defined() && autograd::requires_grad(roots[i]),
                    "dist_autograd.backward: root {} of context {} does not require grad", i, context_id);
    BRAID_CHECK_ARG(roots[i].numel() == 1,
                    "dist_autograd.backward: root {} of context {} has shape {}; roots must be scalars", i,
                    context_id, shape_str(roots[i].shape()));
  }
  ctx->begin_backward(retain_graph);
  BackwardPass pass(context_id);
  {
    PassScope scope(&pass);
    // Retained: a node may be reached again by gradients that arrive later for another send function of
    // this context; the graph goes when the context is released.
    autograd::backward(roots, {}, /*retain_graph=*/true, &ctx->sink());
  }
  // Every propagation has its own RPC deadline; the wait here is a backstop.
  const rpc::Millis backstop = rpc::current_agent().default_timeout() * 2 + rpc::Millis(5000);
  pass.done().value(backstop);
}

size_t num_contexts() { return ContextTable::instance().size(); }

bool has_context(int64_t context_id) { return ContextTable::instance().find(context_id) != nullptr; }

std::vector<ContextInfo> list_contexts() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<ContextInfo> out;
  for (const auto& state : ContextTable::instance().all()) {
    out.push_back(ContextInfo{state->id(), static_cast<int>(state->id() >> 48)  /* the worker id bits: context.h */, now - state->created()});
  }
  return out;
}

bool release_abandoned_context(int64_t context_id) {
  if (!has_context(context_id)) return false;
  const auto backpressure = rpc::is_initialized() ? rpc::current_agent().default_timeout() : rpc::Millis(5000);
  PendingReleases::instance().track(context_id, release_everywhere(context_id, -1), backpressure);
  return true;
}

}  // namespace braid::dist_autograd
