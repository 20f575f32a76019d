#include "autograd/engine.h"

#include <map>
#include <queue>
#include <unordered_map>

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/sparse.h"

namespace braid::autograd {
namespace {

struct GraphTask {
  BackwardOptions options;
  std::vector<std::function<void()>> callbacks;
};

// The innermost backward pass on this thread (a hook may start a nested one).
thread_local GraphTask* current_task = nullptr;

class TaskScope {
 public:
  explicit TaskScope(GraphTask* task) : prev_(current_task) { current_task = task; }
  ~TaskScope() { current_task = prev_; }
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;

 private:
  GraphTask* prev_;
};

// Sums gradients arriving at the same input of a node.
void accumulate_into(Tensor& slot, const Tensor& grad) {
  if (!grad.defined()) return;
  slot = slot.defined() ? add_maybe_sparse(slot, grad) : grad;
}

// A ready node and when it became ready: equal sequence numbers (the accumulators all have the maximum)
// run in the order they became ready, so the pass stays deterministic.
struct ReadyNode {
  Node* node;
  uint64_t order;
};

struct ByPriority {
  bool operator()(const ReadyNode& a, const ReadyNode& b) const {
    if (a.node->sequence_nr() != b.node->sequence_nr()) return a.node->sequence_nr() < b.node->sequence_nr();
    return a.order > b.order;
  }
};

std::unordered_map<Node*, int> count_dependencies(const std::vector<Edge>& roots) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const auto& e : roots) {
    if (e.valid() && !seen[e.function.get()]) {
      seen[e.function.get()] = true;
      stack.push_back(e.function.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& e : n->next_edges()) {
      if (!e.valid()) continue;
      Node* next = e.function.get();
      ++deps[next];
      if (!seen[next]) {
        seen[next] = true;
        stack.push_back(next);
      }
    }
  }
  return deps;
}

}  // namespace

void run_backward(const std::vector<Edge>& roots, const TensorList& root_grads, const BackwardOptions& options) {
  BRAID_CHECK_EQ(roots.size(), root_grads.size(), "run_backward: roots and root gradients differ in number");
  GraphTask task{options, {}};
  TaskScope scope(&task);
  // Gradient math inside backward is not itself recorded.
  NoGradGuard no_grad;

  auto deps = count_dependencies(roots);
  std::unordered_map<Node*, TensorList> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  std::priority_queue<ReadyNode, std::vector<ReadyNode>, ByPriority> ready;
  uint64_t ready_count = 0;

  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    Node* n = roots[i].function.get();
    keep_alive[n] = roots[i].function;
    auto& buf = buffers[n];
    if (buf.size() < n->num_inputs()) buf.resize(n->num_inputs());
    if (buf.size() <= roots[i].input_nr) buf.resize(roots[i].input_nr + 1);
    accumulate_into(buf[roots[i].input_nr], root_grads[i]);
  }
  // In root order, not the hash map's: the order of equal-priority roots must not depend on addresses.
  std::unordered_map<Node*, bool> queued;
  for (const Edge& root : roots) {
    Node* n = root.function.get();
    if (n != nullptr && deps[n] == 0 && !queued[n]) {
      queued[n] = true;
      ready.push({n, ready_count++});
    }
  }

  while (!ready.empty()) {
    Node* n = ready.top().node;
    ready.pop();
    TensorList inputs = std::move(buffers[n]);
    buffers.erase(n);
    if (inputs.size() < n->num_inputs()) inputs.resize(n->num_inputs());
    TensorList outputs = n->run(std::move(inputs));
    if (!options.retain_graph) n->release_variables();
    const auto& edges = n->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      Node* next = e.function.get();
      keep_alive.try_emplace(next, e.function);
      auto& buf = buffers[next];
      if (buf.size() < std::max<size_t>(next->num_inputs(), e.input_nr + 1)) {
        buf.resize(std::max<size_t>(next->num_inputs(), e.input_nr + 1));
      }
      accumulate_into(buf[e.input_nr], outputs[i]);
      if (--deps[next] == 0) ready.push({next, ready_count++});
    }
  }

  // Callbacks may queue more callbacks; run until none is left.
  for (size_t i = 0; i < task.callbacks.size(); ++i) {
    auto cb = std::move(task.callbacks[i]);
    cb();
  }
}

void backward(const TensorList& tensors, const TensorList& grad_tensors, bool retain_graph, GradSink* sink) {
  BRAID_CHECK_ARG(!tensors.empty(), "backward: no tensors given");
  BRAID_CHECK_ARG(grad_tensors.empty() || grad_tensors.size() == tensors.size(),
                  "backward: got {} tensors but {} gradients", tensors.size(), grad_tensors.size());
  std::vector<Edge> roots;
  TensorList grads;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BRAID_CHECK_ARG(requires_grad(t),
                    "backward: element {} of tensors does not require grad and does not have a grad_fn "
                    "(did you forget set_requires_grad()?)", i);
    Tensor g = grad_tensors.empty() ? Tensor() : grad_tensors[i];
    if (!g.defined()) {
      BRAID_CHECK_ARG(t.numel() == 1, "backward: grad can be implicitly created only for scalar outputs (element {} "
                      "has shape {})", i, shape_str(t.shape()));
      g = ones(t.shape(), TensorOptions(t.dtype(), t.device()));
    } else {
      BRAID_CHECK_ARG(g.shape() == t.shape(),
                      "backward: Mismatch in shape: grad_output[{}] has a shape of {} and output[{}] has a shape of {}.",
                      i, shape_str(g.shape()), i, shape_str(t.shape()));
    }
    roots.push_back(gradient_edge(t));
    grads.push_back(g);
  }
  run_backward(roots, grads, BackwardOptions{retain_graph, sink});
}

void backward(const Tensor& tensor, const Tensor& grad, bool retain_graph) {
  backward(TensorList{tensor}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph);
}

namespace {
// Captures the gradients of chosen leaves; others are dropped (grad() must not touch any .grad).
class CaptureSink final : public GradSink {
 public:
  explicit CaptureSink(const TensorList& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) index_[inputs[i].unsafe_impl()] = i;
    grads_.resize(inputs.size());
  }
  Tensor accumulate(const Tensor& leaf, const Tensor& g) override {
    auto it = index_.find(leaf.unsafe_impl());
    if (it == index_.end()) return Tensor();
    Tensor& slot = grads_[it->second];
    slot = slot.defined() ? add_maybe_sparse(slot, g) : (g.is_sparse() ? g : g.clone());
    // Capturing is not accumulating: post-accumulate hooks (DDP's) must not fire for grad().
    return Tensor();
  }
  TensorList take() { return std::move(grads_); }

 private:
  std::unordered_map<const TensorImpl*, size_t> index_;
  TensorList grads_;
};
}  // namespace

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                bool retain_graph, bool allow_unused) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRAID_CHECK_ARG(is_leaf(inputs[i]) && requires_grad(inputs[i]),
                    "grad: input {} ({}) must be a leaf tensor that requires grad", i, inputs[i].describe());
  }
  CaptureSink sink(inputs);
  backward(outputs, grad_outputs, retain_graph, &sink);
  TensorList result = sink.take();
  for (size_t i = 0; i < result.size(); ++i) {
    BRAID_CHECK_ARG(allow_unused || result[i].defined(),
                    "grad: One of the differentiated Tensors (input {}) appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.", i);
  }
  return result;
}

void queue_callback(std::function<void()> callback) {
  BRAID_CHECK_ARG(current_task != nullptr, "queue_callback: Final callbacks can only be installed during backward pass.");
  current_task->callbacks.push_back(std::move(callback));
}

GradSink* current_grad_sink() { return current_task ? current_task->options.sink : nullptr; }
bool in_backward() { return current_task != nullptr; }
bool pass_frees_graph() { return current_task != nullptr && !current_task->options.retain_graph; }

}  // namespace braid::autograd
