#include "autograd/checkpoint.h"

#include <fmt/format.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/grad_sink.h"
#include "autograd/saved_tensor_observer.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/sparse.h"

namespace braid::autograd {
namespace {

thread_local int t_recompute_depth = 0;

class RecomputeScope {
 public:
  RecomputeScope() { ++t_recompute_depth; }
  ~RecomputeScope() { --t_recompute_depth; }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;
};

// The generators a checkpoint replays and their states at the forward.
struct RngSnapshot {
  std::vector<Generator*> generators;
  std::vector<Generator::State> states;

  static RngSnapshot take(const std::vector<Generator*>& extra) {
    RngSnapshot s;
    s.generators.push_back(&default_generator());
    for (Generator* g : extra) {
      BRAID_CHECK_ARG(g != nullptr, "checkpoint: options.generators holds a null generator");
      s.generators.push_back(g);
    }
    for (Generator* g : s.generators) s.states.push_back(g->get_state());
    return s;
  }
  void restore() const {
    for (size_t i = 0; i < generators.size(); ++i) generators[i]->set_state(states[i]);
  }
};

// Restores the generators' current states when the recomputation is over, so that recomputing does not
// change what later code draws (torch forks the RNG around it the same way).
class RngFork {
 public:
  explicit RngFork(const RngSnapshot& at_forward) {
    now_.generators = at_forward.generators;
    for (Generator* g : now_.generators) now_.states.push_back(g->get_state());
    at_forward.restore();
  }
  ~RngFork() { now_.restore(); }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  RngSnapshot now_;
};

// Collects the nested pass's leaf gradients for the checkpoint node's outputs. Tensor hooks of those
// leaves do not run here: they run once, when the outer pass delivers the gradient to the leaf.
class ForwardingSink final : public GradSink {
 public:
  explicit ForwardingSink(const TensorList& leaves) : grads_(leaves.size()) {
    for (size_t i = 0; i < leaves.size(); ++i) index_[leaves[i].unsafe_impl()] = i;
  }
  Tensor accumulate(const Tensor& leaf, const Tensor& grad) override {
    auto it = index_.find(leaf.unsafe_impl());
    BRAID_CHECK_ARG(it != index_.end(),
                    "checkpoint: the recomputed function read a tensor that requires grad ({}{}) but is neither one "
                    "of its inputs nor one of the params given to checkpoint(); its gradient would be lost — pass "
                    "it in params (nn::CheckpointWrapper passes the wrapped module's parameters)",
                    leaf.describe(), meta(leaf) && !meta(leaf)->name.empty() ? ", '" + meta(leaf)->name + "'" : "");
    Tensor& slot = grads_[it->second];
    slot = slot.defined() ? add_maybe_sparse(slot, grad) : grad;
    return Tensor();  // nothing accumulated: no post-accumulate hook fires in the nested pass
  }
  bool runs_tensor_hooks() const override { return false; }
  TensorList take() { return std::move(grads_); }

 private:
  std::unordered_map<const TensorImpl*, size_t> index_;
  TensorList grads_;
};

class CheckpointNode final : public Node {
 public:
  CheckpointNode(std::vector<Edge> edges, CheckpointFunction fn, const TensorList& inputs,
                 std::vector<bool> input_needs_grad, TensorList params, RngSnapshot rng)
      : Node(std::move(edges)),
        fn_(std::move(fn)),
        input_needs_grad_(std::move(input_needs_grad)),
        params_(std::move(params)),
        rng_(std::move(rng)),
        observer_tokens_(detail::observe_checkpoint()) {
    for (const Tensor& x : inputs) saved_inputs_.emplace_back(x, "checkpoint");
  }
  std::string name() const override { return "CheckpointBackward"; }

  void set_forward_outputs(const TensorList& outputs) {
    for (const Tensor& out : outputs) shapes_.push_back(out.defined() ? out.shape() : Shape{});
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mu_);
    Node::release_variables();
    for (auto& s : saved_inputs_) s.reset();
    fn_ = nullptr;
    observer_tokens_.clear();
  }

 protected:
  TensorList apply(TensorList&& grads) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (released()) throw_released(name());
    // Leaves of the recomputed graph: detached inputs (those that required grad require it again) and
    // the parameters, in the order of the node's edges.
    TensorList detached;
    TensorList leaves;
    for (size_t i = 0; i < saved_inputs_.size(); ++i) {
      const Tensor& x = saved_inputs_[i].unpack();
      Tensor d = x.defined() ? detach(x) : x;
      if (input_needs_grad_[i]) {
        set_requires_grad(d);
        leaves.push_back(d);
      }
      detached.push_back(d);
    }
    for (const Tensor& p : params_) {
      BRAID_CHECK_ARG(is_leaf(p),
                      "checkpoint: parameter {} is not a leaf while backward recomputes the checkpointed function "
                      "(something attached a grad_fn to it outside a forward)",
                      p.describe());
      leaves.push_back(p);
    }

    TensorList outputs;
    {
      RngFork fork(rng_);
      EnableGradGuard grad_on;  // the engine runs nodes without grad mode
      RecomputeScope scope;
      outputs = fn_(detached);
    }
    BRAID_CHECK_TYPED(Error, outputs.size() == shapes_.size(),
                "checkpoint: the recomputed function returned {} outputs but the forward returned {}",
                outputs.size(), shapes_.size());
    std::vector<Edge> roots;
    TensorList root_grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& out = outputs[i];
      BRAID_CHECK_TYPED(Error, !out.defined() || out.shape() == shapes_[i],
                  "checkpoint: recomputed output {} has shape [{}] but the forward gave [{}]; the checkpointed "
                  "function must compute the same thing every time it runs",
                  i, fmt::join(out.shape(), ", "), fmt::join(shapes_[i], ", "));
      if (i < grads.size() && grads[i].defined() && out.defined() && requires_grad(out)) {
        roots.push_back(gradient_edge(out));
        root_grads.push_back(grads[i]);
      }
    }
    ForwardingSink sink(leaves);
    if (!roots.empty()) run_backward(roots, root_grads, BackwardOptions{false, &sink});
    return sink.take();
  }

 private:
  std::mutex mu_;  // serialises recomputation (shared graphs under retain_graph) and release
  CheckpointFunction fn_;
  std::vector<SavedTensor> saved_inputs_;
  std::vector<bool> input_needs_grad_;
  TensorList params_;
  RngSnapshot rng_;
  std::vector<Shape> shapes_;
  // Held while the node may still recompute: what fn reads then (parameters) is still needed.
  std::vector<std::shared_ptr<void>> observer_tokens_;
};

}  // namespace

TensorList checkpoint(const CheckpointFunction& fn, const TensorList& inputs, const TensorList& params,
                      const CheckpointOptions& options) {
  BRAID_CHECK_ARG(static_cast<bool>(fn), "checkpoint: the function is empty");
  std::vector<Edge> edges;
  std::vector<bool> input_needs_grad(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && requires_grad(inputs[i])) {
      input_needs_grad[i] = true;
      edges.push_back(gradient_edge(inputs[i]));
    }
  }
  // A parameter registered twice (tied) is one leaf with one edge.
  TensorList grad_params;
  std::unordered_set<const TensorImpl*> seen;
  for (const Tensor& p : params) {
    if (!p.defined() || !requires_grad(p) || !seen.insert(p.unsafe_impl()).second) continue;
    grad_params.push_back(p);
    edges.push_back(gradient_edge(p));  // the accumulator, or the node a forward attached (FSDP)
  }
  if (!GradMode::is_enabled() || edges.empty()) return fn(inputs);

  RngSnapshot rng = RngSnapshot::take(options.generators);
  TensorList outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  auto node = std::make_shared<CheckpointNode>(std::move(edges), fn, inputs, std::move(input_needs_grad),
                                               std::move(grad_params), std::move(rng));
  node->set_forward_outputs(outputs);
  node->set_num_inputs(static_cast<uint32_t>(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    // Only floating outputs carry gradients; a fresh alias keeps fn's output (maybe an input) untouched.
    if (out.defined() && is_floating(out.dtype())) out = set_history(out.alias(), node, static_cast<uint32_t>(i));
  }
  return outputs;
}

bool in_checkpoint_recompute() { return t_recompute_depth > 0; }

}  // namespace braid::autograd
