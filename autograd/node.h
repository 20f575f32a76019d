// The backward graph: Nodes connected by Edges.
//
// A Node is the backward of one forward operation. It takes the gradients of that operation's outputs
// (one per output, undefined when an output got no gradient) and returns the gradients of its inputs, in
// the order of next_edges(). An Edge points at the Node that consumes a gradient and at which of that
// node's inputs it is (input_nr). Leaves that require grad end in an AccumulateGrad node.
//
// Nodes carry a sequence number (creation order, process-wide): the engine runs ready nodes with higher
// numbers first, so the order of a backward pass is deterministic (DDP's bucket readiness relies on it).
// AccumulateGrad nodes take the highest number, as in PyTorch: a leaf's gradient is accumulated (and its
// post-accumulate hooks fire) as soon as it is complete, however old the leaf's accumulator is.
//
// Hooks: pre-hooks see (and may replace) the gradient arriving for one output of the node before it runs;
// post-hooks see the gradients the node produced for its inputs. Tensor hooks are pre-hooks.
//
// Thread-safety: a FunctionNode's apply() runs under the node's mutex, so two backward passes that share
// it (with retain_graph) never run its rule concurrently; AccumulateGrad has its own accumulation lock
// (see accumulate_grad.h). Hooks run outside any node lock, so a hook may start another backward pass, even one
// through the node whose hook is running; hooks shared by concurrent passes must be thread-safe themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace braid::autograd {

using TensorList = std::vector<Tensor>;
class Node;

struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool valid() const { return function != nullptr; }
};

// Returns a replacement gradient, or an undefined tensor to keep the incoming one.
using GradHook = std::function<Tensor(const Tensor& grad)>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::vector<Edge> next_edges = {});
  // With an explicit sequence number (AccumulateGrad: the maximum, to run as soon as it is ready).
  Node(std::vector<Edge> next_edges, uint64_t sequence_nr);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Runs the backward: applies pre-hooks, apply(), post-hooks. Called by the engine.
  TensorList run(TensorList grads);

  virtual std::string name() const = 0;
  // Frees what backward needed (saved tensors); a later run() of a node that had saved tensors throws the
  // "backward through the graph a second time" error. Called by the engine after the node ran when
  // retain_graph is false.
  virtual void release_variables() { released_ = true; }
  bool released() const { return released_; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  // How many outputs of the forward op feed this node (the size of run()'s argument).
  uint32_t num_inputs() const { return num_inputs_; }
  void set_num_inputs(uint32_t n) { num_inputs_ = n; }
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Pre-hook on the gradient of forward output `output_nr`.
  void add_pre_hook(uint32_t output_nr, GradHook hook);
  // Sees the gradients this node produced for its inputs (after it ran).
  void add_post_hook(std::function<void(const TensorList& input_grads)> hook);

 protected:
  virtual TensorList apply(TensorList&& grads) = 0;

  std::atomic<bool> released_{false};

 private:
  std::vector<Edge> next_edges_;
  uint32_t num_inputs_ = 1;
  uint64_t sequence_nr_;
  std::mutex hooks_mu_;  // guards the hook lists only; never held while a hook runs
  std::vector<std::pair<uint32_t, GradHook>> pre_hooks_;
  std::vector<std::function<void(const TensorList&)>> post_hooks_;
};

// A tensor saved for backward, with the version it had when saved: unpacking after an in-place change
// throws an error naming the tensor and the op that saved it. It also keeps the tokens the saved-tensor
// observers of its thread gave for it (saved_tensor_observer.h) exactly as long as it keeps the tensor.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, std::string saved_by);
  // The saved tensor; throws InvalidArgument if it was modified in place since it was saved.
  const Tensor& unpack() const;
  bool defined() const { return tensor_.defined(); }
  void reset();

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
  std::string saved_by_;
  std::vector<std::shared_ptr<void>> observer_tokens_;
};

// The saved tensors of one run of a FunctionNode's rule. release(i) lets a rule drop a tensor it is done
// with before it computes its other gradients, so that memory only the dropped tensor kept can go back
// first (LinearBackward drops the weight once the input's gradient is computed, before the weight's
// gradient is allocated; FSDP gives the gathered parameters back at that point). It does so only when the
// backward pass frees the graph anyway (retain_graph false); otherwise it does nothing.
class SavedTensors {
 public:
  SavedTensors(std::vector<SavedTensor>& saved, bool may_release) : saved_(saved), may_release_(may_release) {}
  const SavedTensor& operator[](size_t i) const { return saved_[i]; }
  size_t size() const { return saved_.size(); }
  void release(size_t i) {
    if (may_release_) saved_[i].reset();
  }

 private:
  std::vector<SavedTensor>& saved_;
  bool may_release_;
};

// A node whose backward is a function: the gradient rule lives next to its forward op (autograd/ops/*).
// `saved` holds the tensors the rule reads; they are released with the graph.
class FunctionNode final : public Node {
 public:
  using Backward = std::function<TensorList(const TensorList& grads, SavedTensors& saved)>;

  FunctionNode(std::string name, std::vector<Edge> next_edges, std::vector<SavedTensor> saved, Backward backward);
  std::string name() const override { return name_; }
  void release_variables() override;

 protected:
  TensorList apply(TensorList&& grads) override;

 private:
  std::string name_;
  std::mutex mu_;                    // serialises the rule and the release of saved_
  std::vector<SavedTensor> saved_;   // GUARDED_BY(mu_)
  bool had_saved_ = false;           // whether running after release_variables() must fail
  Backward backward_;
};

// Throws the error for running a released node.
[[noreturn]] void throw_released(const std::string& node_name);

}  // namespace braid::autograd
