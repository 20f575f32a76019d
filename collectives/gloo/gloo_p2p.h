// Point-to-point send/recv for GlooEngine, on a gloo context of its own.
//
// Posting happens in the caller's thread and never blocks: the tensor is wrapped in an unbound buffer
// and handed to gloo (send, recv from one rank, or recv from any rank but this one) on slot `tag`.
// Completion is observed by waiter threads that call waitSend/waitRecv and then complete the Work.
//
// Why one waiter per (peer, tag, direction) and not one thread for all: gloo can only block on one
// buffer at a time, and ops with different peers or tags complete in any order. A single thread waiting
// on the oldest op would hold back the Work of a newer op that already finished, and a program that
// waits on that newer Work before it makes the message of the older op possible would deadlock. Within
// one (peer, tag, direction), gloo matches in posting order, so a FIFO queue per key is exact. A waiter
// thread exists only while its queue is non-empty (there are rarely more than a few), and is joined by
// the next post or at shutdown.
//
// Posted tensors stay referenced until their op completes. shutdown() aborts the waits still pending
// (their Works fail with CommError: the group was destroyed) and joins every waiter.
//
// Thread-safety: post_* and shutdown may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/deadline.h"
#include "collectives/core/work.h"
#include "tensor/tensor.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace braid::collectives::gloo {

class GlooP2P {
 public:
  explicit GlooP2P(std::shared_ptr<::gloo::Context> context);
  ~GlooP2P();
  GlooP2P(const GlooP2P&) = delete;
  GlooP2P& operator=(const GlooP2P&) = delete;

  void post_send(const Tensor& buffer, int dst, int tag, Deadline deadline, std::shared_ptr<Work> work);
  // src == -1: from any rank but this one; the Work's source_rank() tells which.
  void post_recv(const Tensor& buffer, int src, int tag, Deadline deadline, std::shared_ptr<Work> work);
  // Idempotent.
  void shutdown();

 private:
  struct Op {
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    Tensor tensor;  // keeps the memory alive until completion
    std::shared_ptr<Work> work;
    Deadline deadline = Deadline::never();
  };
  // (peer or -1, tag, is_recv)
  using Key = std::tuple<int, int, bool>;
  struct Waiter {
    std::deque<Op> queue;
    std::thread thread;
    bool running = false;
    // The buffer the thread waits on now (abort target at shutdown).
    ::gloo::transport::UnboundBuffer* waiting_on = nullptr;
  };

  void enqueue(const Key& key, Op op);
  void wait_loop(Key key, Waiter* waiter);
  void complete(const Key& key, Op& op);
  void join_idle_locked(std::unique_lock<std::mutex>& lock);

  std::shared_ptr<::gloo::Context> context_;
  std::mutex mu_;
  bool stopping_ = false;
  std::map<Key, std::unique_ptr<Waiter>> waiters_;
};

}  // namespace braid::collectives::gloo
