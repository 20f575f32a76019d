// Work: the handle every collective returns at once. The operation runs in the background; wait() blocks
// until it finished (rethrowing its error), get_future() gives a Future of the output tensors (what
// torch's fut.value() holds for that op: the in-place tensors for broadcast and allreduce, the outputs for
// the gathers and scatters, an empty list for barrier).
//
// Dropping a Work neither cancels nor leaks the operation: the process group keeps it, and its inputs,
// alive until it completes.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "base/future.h"
#include "tensor/tensor.h"

namespace braid::collectives {

using TensorList = std::vector<Tensor>;

class Work {
 public:
  // Something that can run, on the waiting thread, the queued operations a Work depends on
  // (EngineProcessGroup's op queue). help() runs, in issue order, the ops queued before and up to `work` while
  // no other thread is running one of them, stopping at an op whose deadline lies beyond `limit`, and
  // returns when `work` completed or there is nothing it may run; it never blocks on another thread.
  class Helper {
   public:
    virtual ~Helper() = default;
    virtual void help(const Work& work, std::chrono::steady_clock::time_point limit) = 0;
  };

  // `what` names the operation for errors and logs, e.g. "allreduce #12 on group 'world' (rank 1/4)".
  Work(std::string what, std::chrono::milliseconds default_timeout);
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Waits up to `timeout`; throws TimeoutError naming the operation, or the operation's own error. Unset:
  // the op's timeout plus a few seconds, so that the op's own timeout error (naming the ranks that never
  // joined) is what surfaces.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool is_completed() const { return future_.completed(); }
  bool is_success() const { return future_.completed() && !future_.has_error(); }
  std::exception_ptr exception() const { return future_.error(); }
  Future<TensorList> get_future() const { return future_; }
  // The outputs (after wait()).
  const TensorList& result() const { return future_.value(std::chrono::milliseconds(0)); }
  const std::string& what() const { return future_.what(); }
  // recv / recv_anysource: the rank the message came from (-1 before completion and for other ops).
  int source_rank() const { return source_rank_.load(); }
  // How long wait() looks for completion before it blocks: worth it only for ops that end within a few
  // tens of microseconds (set by the group from the op's size); longer spins compete with the thread
  // doing the work when both share a core.
  void set_wait_spin(std::chrono::microseconds spin) { wait_spin_ = spin; }
  void set_source_rank(int rank) { source_rank_.store(rank); }
  // Set by the group before the Work is returned: wait() runs the op itself when it is still queued and
  // its lane is idle, which saves the two thread hand-offs of a synchronous call.
  void set_helper(std::shared_ptr<Helper> helper) { helper_ = std::move(helper); }

  // Producer side (backends).
  void finish(TensorList outputs) { future_.set_value(std::move(outputs)); }
  void finish_with_error(std::exception_ptr error) { future_.set_error(std::move(error)); }

 private:
  Future<TensorList> future_;
  std::chrono::milliseconds default_timeout_;
  std::atomic<int> source_rank_{-1};
  std::chrono::microseconds wait_spin_{0};
  std::shared_ptr<Helper> helper_;
};

}  // namespace braid::collectives
