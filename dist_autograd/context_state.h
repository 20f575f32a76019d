// What a worker keeps per distributed autograd context, and the process's table of contexts.
//
// A ContextState holds the context's send functions (by the message id they were recorded under: the
// gradients for one come back naming it), the workers it exchanged messages with (they are told when the
// context is released), and the gradient map its backward passes accumulate into. The table creates
// states for contexts started here (Context) and on demand for contexts that arrive with an RPC.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_set>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "autograd/grad_sink.h"
#include "dist_autograd/context.h"
#include "dist_autograd/send_recv.h"

namespace braid::dist_autograd {

// The context's gradient map as autograd's GradSink: leaf gradients land here, never in .grad.
class ContextGradSink final : public autograd::GradSink {
 public:
  Tensor accumulate(const Tensor& leaf, const Tensor& grad) override;
  GradientMap snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<GradientEntry> entries_;                            // GUARDED_BY(mu_), in first-seen order
  std::unordered_map<const TensorImpl*, size_t> index_;           // GUARDED_BY(mu_)
};

class ContextState {
 public:
  explicit ContextState(int64_t id) : id_(id), created_(std::chrono::steady_clock::now()) {}
  int64_t id() const { return id_; }
  // When this worker first saw the context (its age is what the runtime's sweep of abandoned contexts
  // looks at).
  std::chrono::steady_clock::time_point created() const { return created_; }

  void add_known_worker(int worker);
  std::vector<int> known_workers() const;

  void add_send_function(int64_t message_id, std::shared_ptr<SendRpcBackward> send);
  // Null when this context recorded no send function under `message_id`.
  std::shared_ptr<SendRpcBackward> send_function(int64_t message_id) const;

  ContextGradSink& sink() { return sink_; }

  // Called by backward() on the worker that starts a pass: a context whose graph was run without
  // retain_graph cannot be run again.
  void begin_backward(bool retain_graph);

 private:
  const int64_t id_;
  const std::chrono::steady_clock::time_point created_;
  mutable std::mutex mu_;
  std::set<int> known_workers_;                                               // GUARDED_BY(mu_)
  std::unordered_map<int64_t, std::shared_ptr<SendRpcBackward>> sends_;       // GUARDED_BY(mu_)
  bool graph_consumed_ = false;                                               // GUARDED_BY(mu_)
  ContextGradSink sink_;
};

class ContextTable {
 public:
  static ContextTable& instance();

  // A new context started by worker `worker_id`.
  std::shared_ptr<ContextState> create(int worker_id);
  // The context, created when this worker has not seen it yet (it arrived with an RPC). A message that
  // arrives for a context this worker released recently (a straggler of that context) is refused with
  // InvalidArgument instead of resurrecting it: nothing would release it again.
  std::shared_ptr<ContextState> get_or_create(int64_t id);
  std::shared_ptr<ContextState> find(int64_t id) const;
  // InvalidArgument "Could not find autograd context with id: <id>".
  std::shared_ptr<ContextState> retrieve(int64_t id) const;
  // Removes and returns the context (null when absent). The caller drops the graph outside the lock.
  std::shared_ptr<ContextState> erase(int64_t id);
  size_t size() const;
  // Every context held here, in no particular order.
  std::vector<std::shared_ptr<ContextState>> all() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<int64_t, std::shared_ptr<ContextState>> contexts_;  // GUARDED_BY(mu_)
  uint64_t next_local_ = 0;                                               // GUARDED_BY(mu_)
  // The most recently released ids, oldest first (bounded: kRememberReleased).
  std::deque<int64_t> released_order_;                                    // GUARDED_BY(mu_)
  std::unordered_set<int64_t> released_;                                  // GUARDED_BY(mu_)
};

// This thread's current context (null when none).
std::shared_ptr<ContextState> current_context_state();

// Makes `state` this thread's current context until destroyed, then restores the previous one.
class CurrentContextScope {
 public:
  explicit CurrentContextScope(std::shared_ptr<ContextState> state);
  ~CurrentContextScope();
  CurrentContextScope(const CurrentContextScope&) = delete;
  CurrentContextScope& operator=(const CurrentContextScope&) = delete;

 private:
  std::shared_ptr<ContextState> prev_;
};

}  // namespace braid::dist_autograd
