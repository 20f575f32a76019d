// Distributed autograd contexts: braid's `with dist_autograd.context() as context_id`.
//
//   {
//     dist_autograd::Context ctx;                       // current on this thread until it goes out of scope
//     Tensor y = rpc::rpc_sync("worker1", "f", {Value(x)}).as_tensor();   // records send/recv functions
//     Tensor loss = sum(y);
//     dist_autograd::backward(ctx.id(), {loss});        // runs every worker's part of the graph
//     GradientMap grads = dist_autograd::get_gradients(ctx.id());   // this worker's leaves only
//   }                                                   // released here, then on every worker it reached
//
// A context id is unique across the job: the worker id sits in the high 16 bits, a per-process counter in
// the low 48. Inside a context, every RPC call (rpc_sync/rpc_async/remote/to_here and RRef method calls)
// carries the context id; tensors that require grad among its arguments or results record a send function
// on the sender and a receive function on the receiver (dist_autograd/rpc_hooks.cc), and the receiver
// creates the context on demand and makes it current while the called function runs.
//
// Gradients of a distributed backward pass go into the context's gradient map, never into .grad.
//
// Thread-safety: contexts are independent; every function here may be called from any thread. A thread
// has at most one current context (PyTorch: "Already have an autograd context id for this thread").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tensor/tensor.h"

namespace braid::dist_autograd {

class ContextState;
class CurrentContextScope;

// The RAII scope of one context: creating it starts a context and makes it current on this thread;
// destroying it releases the context on this worker at once and tells every worker that took part, without
// waiting for them to confirm (wait_for_releases does), and clears the thread's current context.
class Context {
 public:
  // Needs a running RPC agent (the worker id is part of the context id). Throws InvalidArgument when this
  // thread already has a current context.
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int64_t id() const { return id_; }

 private:
  int64_t id_;
  std::shared_ptr<ContextState> state_;
  std::unique_ptr<CurrentContextScope> scope_;
};

// The id of this thread's current context; -1 when there is none.
int64_t current_context_id();

// One leaf tensor (a parameter) of this worker and its gradient in a context.
struct GradientEntry {
  Tensor tensor;
  Tensor grad;
};

// A snapshot of a context's gradient map on this worker (tensor identity -> gradient). The gradient
// tensors are the context's own: an in-place change to one is seen by later readers in the context.
class GradientMap {
 public:
  GradientMap() = default;
  explicit GradientMap(std::vector<GradientEntry> entries);

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  bool contains(const Tensor& tensor) const { return find(tensor) != nullptr; }
  // The gradient of `tensor`; InvalidArgument naming it when the context holds none.
  const Tensor& at(const Tensor& tensor) const;
  // Null when absent.
  const Tensor* find(const Tensor& tensor) const;
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  std::vector<GradientEntry> entries_;
  std::unordered_map<const TensorImpl*, size_t> index_;
};

// This worker's gradients in context `context_id`. InvalidArgument "Could not find autograd context with
// id: <id>" for an unknown or released context.
GradientMap get_gradients(int64_t context_id);

// Runs the distributed backward pass from `roots` (scalars that require grad) in context `context_id`:
// this worker's part of the graph, then, through RPC, the parts on the workers that sent the tensors
// whose gradients it reaches, recursively. Returns when every worker's part is done; gradients
// accumulate in each worker's context map. A failure anywhere (a remote exception, a dead worker, a
// timeout) fails this call with the remote worker's name and message.
//
// Without retain_graph, the context's graph may not be run again ("Trying to backward through the graph a
// second time"); saved tensors are freed when the context is released.
void backward(int64_t context_id, const std::vector<Tensor>& roots, bool retain_graph = false);

// Waits until the other workers confirmed every context release this process started before the call
// (leaving a Context returns before they do, as PyTorch's cleanup does). TimeoutError names the contexts
// still unconfirmed. A release that failed (a dead worker) counts as finished; it was logged.
void wait_for_releases(std::chrono::milliseconds timeout);

// How many contexts this worker holds (its own and those it joined); for tests and diagnostics.
size_t num_contexts();
// Whether this worker holds context `context_id`.
bool has_context(int64_t context_id);

// A context this worker holds, for sweeping those a dead trainer left behind: nothing else would ever
// release them (their creator's Context destructor never runs), and each keeps its graph's saved tensors.
struct ContextInfo {
  int64_t id = -1;
  int creator = -1;  // the worker id of the worker that started it (the id's high bits)
  std::chrono::steady_clock::duration age{};  // since this worker first saw it
};
std::vector<ContextInfo> list_contexts();
// Releases context `context_id` here and, best effort, on the workers it exchanged messages with (a
// failure, e.g. its dead creator, is logged, not thrown). False when this worker does not hold it.
bool release_abandoned_context(int64_t context_id);

}  // namespace braid::dist_autograd
