// The two autograd nodes distributed autograd adds at every RPC that carries tensors requiring grad, and
// the backward pass that runs them.
//
//   sender:    x --(SendRpcBackward)--> [message m of context c] --> receiver: RecvRpcBackward --> x'
//
// SendRpcBackward sits on the sender, its edges pointing at the sent tensors' gradient edges; it is a
// root of the sender's part of the graph and passes on the gradients it is given. RecvRpcBackward is the
// grad_fn of the received tensors; when the backward pass reaches it, it sends their gradients to the
// sender (context c, message m), whose pass then starts from the matching SendRpcBackward.
//
// A BackwardPass is one worker's part of one distributed backward pass: the local engine run plus the
// gradient propagations it started. RecvRpcBackward registers its RPC with the pass running on its
// thread; the pass is complete when all of them are, which is when the receivers' own parts are.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "autograd/node.h"
#include "base/future.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

class SendRpcBackward final : public autograd::Node {
 public:
  explicit SendRpcBackward(std::vector<autograd::Edge> edges);
  std::string name() const override { return "SendRpcBackward"; }
  // Holds no saved state: it may be run once per gradient message that reaches it.
  void release_variables() override {}

 protected:
  autograd::TensorList apply(autograd::TensorList&& grads) override { return std::move(grads); }
};

class RecvRpcBackward final : public autograd::Node {
 public:
  RecvRpcBackward(int64_t context_id, int64_t message_id, int sender);
  std::string name() const override { return "RecvRpcBackward"; }
  void release_variables() override {}

 protected:
  autograd::TensorList apply(autograd::TensorList&& grads) override;

 private:
  const int64_t context_id_;
  const int64_t message_id_;
  const int sender_;
};

class BackwardPass {
 public:
  explicit BackwardPass(int64_t context_id) : context_id_(context_id) {}
  int64_t context_id() const { return context_id_; }

  // Sends `grads` for send function `message_id` to worker `to` (an RPC of the internal function
  // kPropagateFunction) and remembers the reply.
  void propagate(int to, int64_t message_id, const autograd::TensorList& grads);
  // Completes when every propagation did; fails with the first failure.
  Future<rpc::Value> done() const;

 private:
  const int64_t context_id_;
  mutable std::mutex mu_;
  std::vector<Future<rpc::Value>> sent_;  // GUARDED_BY(mu_)
};

// The pass running on this thread (null outside distributed backward).
BackwardPass* current_pass();

class PassScope {
 public:
  explicit PassScope(BackwardPass* pass);
  ~PassScope();
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  BackwardPass* prev_;
};

// A future that completes when all of `futures` did (with none), or fails with the first error.
Future<rpc::Value> when_all(const std::vector<Future<rpc::Value>>& futures, std::string what);

// Names of the internal RPC functions (registered by rpc_hooks.cc).
inline constexpr const char* kPropagateFunction = "braid.dist_autograd.propagate_gradients";
inline constexpr const char* kReleaseFunction = "braid.dist_autograd.release_context";

// RPCs that distributed autograd itself makes (gradient propagation, release) must not carry the
// caller's context: this scope turns the call hooks off on the current thread.
class InternalCallScope {
 public:
  InternalCallScope();
  ~InternalCallScope();
  InternalCallScope(const InternalCallScope&) = delete;
  InternalCallScope& operator=(const InternalCallScope&) = delete;
  static bool active();

 private:
  bool prev_;
};

}  // namespace braid::dist_autograd
