#include "collectives/mpi/mpi_p2p.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi/mpi_types.h"
#include "collectives/mpi/mpi_wait.h"

namespace braid::collectives::mpi {

namespace {

// How long stop() waits for a cancelled request to complete before handing it to the runtime.
constexpr Millis kCancelGrace{1000};
// How often requests that no Work waits for are tested.
constexpr Millis kIdlePoll{10};

std::exception_ptr make_error_ptr(const Error& e) { return std::make_exception_ptr(e); }

}  // namespace

MpiP2p::MpiP2p(MPI_Comm comm, std::shared_ptr<MpiRuntime> runtime, std::string group)
    : comm_(comm), runtime_(std::move(runtime)), group_(std::move(group)) {}

MpiP2p::~MpiP2p() { stop(); }

void MpiP2p::post_send(const Tensor& buffer, int dst, int tag, Deadline deadline, std::shared_ptr<Work> work) {
  Pending p;
  p.kind = Kind::Send;
  p.buffer = buffer;
  p.work = std::move(work);
  p.peer = dst;
  p.tag = tag;
  p.deadline = deadline;
  p.posted = Clock::now();
  try {
    const int count = mpi_count(buffer.numel(), p.work->what());
    check_mpi(MPI_Isend(buffer.data_ptr(), count, mpi_move_type(buffer.dtype()), dst, tag, comm_, &p.request),
              "MPI_Isend", p.work->what());
  } catch (const Error& e) {
    p.work->finish_with_error(make_error_ptr(e));
    return;
  }
  enqueue(std::move(p));
}

void MpiP2p::post_recv(const Tensor& buffer, int src, int tag, Deadline deadline, std::shared_ptr<Work> work) {
  Pending p;
  p.kind = Kind::Recv;
  p.buffer = buffer;
  p.work = std::move(work);
  p.peer = src;
  p.tag = tag;
  p.deadline = deadline;
  p.posted = Clock::now();
  try {
    const int count = mpi_count(buffer.numel(), p.work->what());
    check_mpi(MPI_Irecv(buffer.data_ptr(), count, mpi_move_type(buffer.dtype()), src < 0 ? MPI_ANY_SOURCE : src,
                        tag, comm_, &p.request),
              "MPI_Irecv", p.work->what());
  } catch (const Error& e) {
    p.work->finish_with_error(make_error_ptr(e));
    return;
  }
  enqueue(std::move(p));
}

void MpiP2p::adopt_abandoned(MPI_Request request, std::any keep) {
  Pending p;
  p.kind = Kind::Abandoned;
  p.request = request;
  p.keep = std::move(keep);
  p.posted = Clock::now();
  enqueue(std::move(p));
}

void MpiP2p::enqueue(Pending pending) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopped_) {
    // Only reachable when a call races with the group's destruction; the request is already posted.
    lock.unlock();
    if (pending.work) {
      pending.work->finish_with_error(make_error_ptr(
          CommError(fmt::format("{}: group '{}' was shut down", pending.work->what(), group_))));
    }
    runtime_->keep_until_finalize(std::make_pair(pending.buffer, std::move(pending.keep)));
    return;
  }
  incoming_.push_back(std::move(pending));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });  // started on first use
  lock.unlock();
  cv_.notify_one();
}

void MpiP2p::run() {
  Backoff backoff;
  const auto ready = [this] { return stop_ || !incoming_.empty(); };
  // Sleeping on the condition variable rather than in nanosleep lets a new post wake the thread at once.
  const auto sleep = [&](std::chrono::microseconds pause) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, pause, ready);
  };
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (active_.empty()) {
        cv_.wait(lock, ready);
      } else if (!any_work()) {
        // Only requests nobody waits for (timed-out collectives, uncancellable sends): look rarely.
        cv_.wait_for(lock, kIdlePoll, ready);
      }
      if (stop_) return;
      for (auto& p : incoming_) {
        requests_.push_back(p.request);
        active_.push_back(std::move(p));
      }
      if (!incoming_.empty()) backoff.reset(busy_window());
      incoming_.clear();
    }
    if (poll()) backoff.reset(busy_window());
    // Deadlines: a timed-out send/recv fails now; its request stays until the cancel completes.
    const auto now = Clock::now();
    for (auto& p : active_) {
      if (p.work && now >= p.deadline.at()) expire(p);
    }
    if (any_work()) backoff.pause(sleep);
  }
}

std::chrono::microseconds MpiP2p::busy_window() const {
  size_t bytes = 0;
  for (const auto& p : active_) {
    if (p.work) bytes = std::max(bytes, p.buffer.nbytes());
  }
  return Backoff::busy_window(bytes);
}

bool MpiP2p::any_work() const {
  for (const auto& p : active_) {
    if (p.work) return true;
  }
  return false;
}

bool MpiP2p::poll() {
  if (requests_.empty()) return false;
  const int n = static_cast<int>(requests_.size());
  std::vector<int> indices(requests_.size());
  std::vector<MPI_Status> statuses(requests_.size());
  int done = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &done, indices.data(), statuses.data());
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
    // Not tied to one request: fail everything, the communicator is unusable.
    const std::string why = mpi_error_string(rc);
    for (auto& p : active_) {
      if (p.work) {
        p.work->finish_with_error(make_error_ptr(CommError(fmt::format("{}: MPI_Testsome failed: {}", describe(p), why))));
        p.work.reset();
      }
    }
    logging::get("braid.coll")->error("mpi group '{}': MPI_Testsome failed: {}", group_, why);
    return false;
  }
  if (done == MPI_UNDEFINED || done == 0) return false;
  for (int i = 0; i < done; ++i) {
    const int k = indices[static_cast<size_t>(i)];
    const int error = rc == MPI_ERR_IN_STATUS ? statuses[static_cast<size_t>(i)].MPI_ERROR : MPI_SUCCESS;
    complete(active_[static_cast<size_t>(k)], statuses[static_cast<size_t>(i)], error);
  }
  // Completed requests are MPI_REQUEST_NULL now; drop them (and their buffers) in one pass.
  size_t out = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    if (out != i) {
      active_[out] = std::move(active_[i]);
      requests_[out] = requests_[i];
    }
    ++out;
  }
  active_.resize(out);
  requests_.resize(out);
  return true;
}

void MpiP2p::complete(Pending& p, const MPI_Status& status, int error) {
  if (!p.work) return;  // already failed (timeout) or an abandoned collective
  auto work = std::move(p.work);
  if (error != MPI_SUCCESS && error != MPI_ERR_PENDING) {
    work->finish_with_error(make_error_ptr(CommError(fmt::format("{} failed: {}", describe(p), mpi_error_string(error)))));
    return;
  }
  if (p.kind == Kind::Recv) {
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    if (static_cast<size_t>(bytes) != p.buffer.nbytes()) {
      work->finish_with_error(make_error_ptr(CommError(fmt::format(
          "{}: rank {} sent {} bytes but the receive buffer ({}) holds {}", describe(p), status.MPI_SOURCE, bytes,
          p.buffer.describe(), p.buffer.nbytes()))));
      return;
    }
    work->set_source_rank(status.MPI_SOURCE);
  }
  work->finish(TensorList{p.buffer});
}

void MpiP2p::expire(Pending& p) {
  // Cancelling an unmatched receive always works; Open MPI may refuse to cancel a send, which then waits
  // here (buffer alive) until a receiver takes it or the group stops.
  MPI_Cancel(&p.request);
  const auto work = std::move(p.work);
  work->finish_with_error(make_error_ptr(TimeoutError(fmt::format(
      "{} timed out after {:.0f} ms", describe(p), elapsed_ms(p.posted)))));
}

std::string MpiP2p::describe(const Pending& p) const {
  const std::string what = p.work ? p.work->what() : std::string("request");
  switch (p.kind) {
    case Kind::Send:
      return fmt::format("{} (send of {} to rank {}, tag {})", what, p.buffer.describe(), p.peer, p.tag);
    case Kind::Recv:
      return p.peer < 0 ? fmt::format("{} (recv of {} from any rank, tag {})", what, p.buffer.describe(), p.tag)
                        : fmt::format("{} (recv of {} from rank {}, tag {})", what, p.buffer.describe(), p.peer,
                                      p.tag);
    case Kind::Abandoned:
      return fmt::format("{} (a timed-out collective)", what);
  }
  return what;
}

void MpiP2p::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stop_ = true;
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& p : incoming_) {
    requests_.push_back(p.request);
    active_.push_back(std::move(p));
  }
  incoming_.clear();
  release_remaining();
}

void MpiP2p::release_remaining() {
  for (auto& p : active_) {
    if (p.work) {
      auto work = std::move(p.work);
      work->finish_with_error(make_error_ptr(CommError(fmt::format(
          "{}: group '{}' was shut down before it completed", describe(p), group_))));
    }
  }
  if (MpiRuntime::finalized()) {
    // No MPI call may follow MPI_Finalize; the requests went with it.
    active_.clear();
    requests_.clear();
    return;
  }
  const auto grace = Deadline::after(kCancelGrace);
  for (size_t i = 0; i < active_.size(); ++i) {
    if (active_[i].kind != Kind::Abandoned) MPI_Cancel(&requests_[i]);
  }
  // Cancelled receives (and sends Open MPI agreed to cancel) complete promptly; a timed-out collective is
  // only tested once, it has no reason to finish now.
  Backoff backoff;
  for (bool first = true; first || !grace.expired(); first = false) {
    bool pending = false;
    for (size_t i = 0; i < active_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL || (!first && active_[i].kind == Kind::Abandoned)) continue;
      int done = 0;
      MPI_Test(&requests_[i], &done, MPI_STATUS_IGNORE);
      pending = pending || (!done && active_[i].kind != Kind::Abandoned);
    }
    if (!pending) break;
    backoff.pause();
  }
  for (size_t i = 0; i < active_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    // Point-to-point requests may be freed while active; a collective's may not. Either way MPI may still
    // touch the buffer, so it lives until MPI_Finalize.
    if (active_[i].kind != Kind::Abandoned) MPI_Request_free(&requests_[i]);
    runtime_->keep_until_finalize(std::make_pair(std::move(active_[i].buffer), std::move(active_[i].keep)));
  }
  active_.clear();
  requests_.clear();
}

}  // namespace braid::collectives::mpi
