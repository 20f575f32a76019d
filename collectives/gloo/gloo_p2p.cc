#include "collectives/gloo/gloo_p2p.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "base/check.h"
#include "collectives/gloo/gloo_errors.h"
#include "collectives/gloo/gloo_timeout.h"

namespace braid::collectives::gloo {

namespace {

// The p2p context carries nothing but send/recv, so the user's tag is the slot as is.
uint64_t slot_of(int tag) { return static_cast<uint64_t>(static_cast<uint32_t>(tag)); }

// From a catch block: completes `work` with the exception in flight, as a braid error.
void fail_with_current_exception(Work& work, const Deadline& deadline) {
  try {
    rethrow_as_braid_error(work.what(), deadline);
  } catch (...) {
    work.finish_with_error(std::current_exception());
  }
}

}  // namespace

GlooP2P::GlooP2P(std::shared_ptr<::gloo::Context> context) : context_(std::move(context)) {}

GlooP2P::~GlooP2P() { shutdown(); }

void GlooP2P::post_send(const Tensor& buffer, int dst, int tag, Deadline deadline, std::shared_ptr<Work> work) {
  Op op{context_->createUnboundBuffer(buffer.data_ptr(), buffer.nbytes()), buffer, std::move(work), deadline};
  try {
    op.buffer->send(dst, slot_of(tag), 0, buffer.nbytes());
  } catch (...) {
    fail_with_current_exception(*op.work, deadline);
    return;
  }
  enqueue(Key{dst, tag, false}, std::move(op));
}

void GlooP2P::post_recv(const Tensor& buffer, int src, int tag, Deadline deadline, std::shared_ptr<Work> work) {
  Op op{context_->createUnboundBuffer(buffer.data_ptr(), buffer.nbytes()), buffer, std::move(work), deadline};
  try {
    // The byte count is always explicit: gloo's recv-from-any rejects an empty buffer otherwise.
    if (src >= 0) {
      op.buffer->recv(src, slot_of(tag), 0, buffer.nbytes());
    } else {
      std::vector<int> others;
      for (int r = 0; r < context_->size; ++r) {
        if (r != context_->rank) others.push_back(r);
      }
      op.buffer->recv(others, slot_of(tag), 0, buffer.nbytes());
    }
  } catch (...) {
    fail_with_current_exception(*op.work, deadline);
    return;
  }
  enqueue(Key{src, tag, true}, std::move(op));
}

void GlooP2P::enqueue(const Key& key, Op op) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    // The transfer was posted; its buffer goes with `op`, which gloo tolerates (it holds weak references).
    op.work->finish_with_error(std::make_exception_ptr(
        CommError(op.work->what() + ": the process group is shutting down")));
    return;
  }
  join_idle_locked(lock);
  auto& waiter = waiters_[key];
  if (!waiter) waiter = std::make_unique<Waiter>();
  waiter->queue.push_back(std::move(op));
  if (!waiter->running) {
    if (waiter->thread.joinable()) waiter->thread.join();
    waiter->running = true;
    waiter->thread = std::thread([this, key, w = waiter.get()] { wait_loop(key, w); });
  }
}

void GlooP2P::join_idle_locked(std::unique_lock<std::mutex>& /*lock*/) {
  // An idle waiter's thread has left wait_loop and needs mu_ no more, so joining under the lock is safe.
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Waiter& w = *it->second;
    if (!w.running && w.queue.empty()) {
      if (w.thread.joinable()) w.thread.join();
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void GlooP2P::wait_loop(Key key, Waiter* waiter) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!waiter->queue.empty()) {
    // References to deque elements survive push_back by posting threads; only this thread pops.
    Op& op = waiter->queue.front();
    if (!stopping_) {
      waiter->waiting_on = op.buffer.get();
      lock.unlock();
      complete(key, op);
      lock.lock();
      waiter->waiting_on = nullptr;
    } else {
      op.work->finish_with_error(std::make_exception_ptr(
          CommError(op.work->what() + ": the process group was destroyed while this op was pending")));
    }
    waiter->queue.pop_front();
  }
  waiter->running = false;
}

void GlooP2P::complete(const Key& key, Op& op) {
  const bool is_recv = std::get<2>(key);
  try {
    int peer = -1;
    const auto timeout = gloo_timeout(op.deadline);
    const bool done = is_recv ? op.buffer->waitRecv(&peer, timeout) : op.buffer->waitSend(&peer, timeout);
    if (!done) {
      BRAID_THROW(CommError, "{}: the process group was destroyed while this op was pending", op.work->what());
    }
    if (is_recv) op.work->set_source_rank(peer);
  } catch (...) {
    fail_with_current_exception(*op.work, op.deadline);
    return;
  }
  op.work->finish({op.tensor});
}

void GlooP2P::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [key, waiter] : waiters_) {
      if (waiter->waiting_on != nullptr) {
        if (std::get<2>(key)) {
          waiter->waiting_on->abortWaitRecv();
        } else {
          waiter->waiting_on->abortWaitSend();
        }
      }
      if (waiter->thread.joinable()) threads.push_back(std::move(waiter->thread));
    }
  }
  for (auto& t : threads) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  waiters_.clear();
}

}  // namespace braid::collectives::gloo
