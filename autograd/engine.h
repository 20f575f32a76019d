// The backward engine.
//
// run_backward() executes the graph reachable from the root edges on the calling thread: it counts each
// node's dependencies first, then runs nodes whose inputs are complete, highest sequence number first,
// summing gradients that meet at a node. No recursion, so graph depth is unbounded. Each call is an
// independent graph task: backward may run on several threads at once (on independent graphs, or on a
// shared graph with retain_graph: nodes lock themselves), and may be started from inside a hook, a
// callback or an RPC handler thread.
//
// Callbacks queued with queue_callback() during a backward pass run once, in order, after every node of
// that pass finished (DDP finalises its buckets there).
#pragma once

#include <functional>
#include <vector>

#include "autograd/grad_sink.h"
#include "autograd/node.h"

namespace braid::autograd {

struct BackwardOptions {
  // Keep saved tensors so that the graph can be run again.
  bool retain_graph = false;
  // Where leaf gradients go; null means each leaf's .grad.
  GradSink* sink = nullptr;
};

// Runs the graph from `roots` with the given gradient per root.
void run_backward(const std::vector<Edge>& roots, const TensorList& root_grads, const BackwardOptions& options);

// Backward from tensors: grads default to ones for one-element tensors; a non-scalar tensor needs an
// explicit gradient ("grad can be implicitly created only for scalar outputs").
void backward(const TensorList& tensors, const TensorList& grad_tensors = {}, bool retain_graph = false,
              GradSink* sink = nullptr);
void backward(const Tensor& tensor, const Tensor& grad = Tensor(), bool retain_graph = false);

// The gradients of `outputs` with respect to the leaf tensors `inputs`, without touching .grad.
// An input that does not affect the outputs gets an undefined tensor if allow_unused, else an error.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool allow_unused = false);

// Queues `callback` to run when the backward pass running on this thread finishes. Throws outside backward.
void queue_callback(std::function<void()> callback);
// The sink of the backward pass running on this thread (null when it writes .grad or none runs).
GradSink* current_grad_sink();
// Whether a backward pass is running on this thread.
bool in_backward();
// Whether the backward pass running on this thread releases each node's saved tensors after running it
// (retain_graph false); false outside a pass. FunctionNode lets rules release early only then.
bool pass_frees_graph();

}  // namespace braid::autograd
