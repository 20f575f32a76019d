#include "autograd/node.h"

#include "autograd/engine.h"
#include "autograd/saved_tensor_observer.h"
#include "base/check.h"

namespace braid::autograd {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}

Node::Node(std::vector<Edge> next_edges)
    : next_edges_(std::move(next_edges)), sequence_nr_(next_sequence_nr.fetch_add(1)) {}

Node::Node(std::vector<Edge> next_edges, uint64_t sequence_nr)
    : next_edges_(std::move(next_edges)), sequence_nr_(sequence_nr) {}

void Node::add_pre_hook(uint32_t output_nr, GradHook hook) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  pre_hooks_.emplace_back(output_nr, std::move(hook));
}

void Node::add_post_hook(std::function<void(const TensorList&)> hook) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  post_hooks_.push_back(std::move(hook));
}

TensorList Node::run(TensorList grads) {
  // Hooks run on copies of the lists and without a lock: a hook that starts a backward pass through this
  // node (re-entrant, or on another thread it waits for) must not find the node locked.
  std::vector<std::pair<uint32_t, GradHook>> pre_hooks;
  std::vector<std::function<void(const TensorList&)>> post_hooks;
  {
    std::lock_guard<std::mutex> lock(hooks_mu_);
    pre_hooks = pre_hooks_;
    post_hooks = post_hooks_;
  }
  for (auto& [nr, hook] : pre_hooks) {
    if (nr < grads.size() && grads[nr].defined()) {
      Tensor replaced = hook(grads[nr]);
      if (replaced.defined()) {
        BRAID_CHECK_ARG(replaced.shape() == grads[nr].shape(),
                        "hook on {} returned a gradient of shape {} for a gradient of shape {}", name(),
                        shape_str(replaced.shape()), shape_str(grads[nr].shape()));
        grads[nr] = std::move(replaced);
      }
    }
  }
  TensorList out = apply(std::move(grads));
  BRAID_ASSERT(out.size() == next_edges_.size(), "{} returned {} gradients for {} inputs", name(), out.size(),
               next_edges_.size());
  for (auto& hook : post_hooks) hook(out);
  return out;
}

void throw_released(const std::string& node_name) {
  BRAID_THROW(InvalidArgument,
              "Trying to backward through the graph a second time (or directly access saved tensors after they "
              "have already been freed) in {}. Saved intermediate values of the graph are freed when you call "
              ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
              "graph a second time or if you need to access saved tensors after calling backward.",
              node_name);
}

SavedTensor::SavedTensor(const Tensor& t, std::string saved_by)
    : tensor_(t.defined() ? t.alias() : Tensor()),
      version_(t.defined() ? t.version() : 0),
      saved_by_(std::move(saved_by)),
      observer_tokens_(t.defined() ? detail::observe_saved(t) : std::vector<std::shared_ptr<void>>{}) {}

void SavedTensor::reset() {
  tensor_ = Tensor();
  observer_tokens_.clear();
}

const Tensor& SavedTensor::unpack() const {
  if (tensor_.defined() && tensor_.version() != version_) {
    BRAID_THROW(InvalidArgument,
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                "[{}], which was saved by {}, is at version {}; expected version {} instead.",
                tensor_.describe(), saved_by_, tensor_.version(), version_);
  }
  return tensor_;
}

FunctionNode::FunctionNode(std::string name, std::vector<Edge> next_edges, std::vector<SavedTensor> saved,
                           Backward backward)
    : Node(std::move(next_edges)), name_(std::move(name)), saved_(std::move(saved)), backward_(std::move(backward)) {
  for (const SavedTensor& s : saved_) had_saved_ = had_saved_ || s.defined();
}

void FunctionNode::release_variables() {
  std::lock_guard<std::mutex> lock(mu_);
  Node::release_variables();
  saved_.clear();
}

TensorList FunctionNode::apply(TensorList&& grads) {
  std::lock_guard<std::mutex> lock(mu_);
  // As in PyTorch, only freed saved tensors make a second run fail: a rule that saved nothing (add, sum,
  // views, mul by a scalar) can run again.
  if (released_ && had_saved_) throw_released(name_);
  SavedTensors saved(saved_, pass_frees_graph());
  return backward_(grads, saved);
}

}  // namespace braid::autograd
