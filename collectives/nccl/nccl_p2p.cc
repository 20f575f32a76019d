#include "collectives/nccl/nccl_p2p.h"

#include <fmt/format.h>

#include <deque>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/nccl/backoff.h"
#include "collectives/nccl/cuda_handles.h"
#include "collectives/nccl/nccl_types.h"

namespace braid::collectives::nccl {

struct NcclP2P::Op {
  bool is_send = true;
  int peer = 0;
  Tensor buffer;
  Deadline deadline = Deadline::never();
  std::shared_ptr<Work> work;
  std::unique_ptr<CudaEvent> done;  // recorded on the pair's stream once issued
};

struct NcclP2P::Pair {
  enum class State { kNew, kWaitingForId, kInitializing, kReady, kBroken };
  int peer = 0;
  int index = 0;  // this rank's rank in the two-rank communicator (0: the lower rank)
  std::string key;
  std::string name;
  State state = State::kNew;
  std::shared_ptr<NcclComm> comm;
  std::unique_ptr<CudaStream> stream;
  std::unique_ptr<CudaEvent> inputs_ready;
  std::deque<Op> waiting;  // posted, not issued yet (the communicator is being set up)
  std::deque<Op> issued;   // on the stream, completing in order
  std::string failure;     // why the pair broke
};

namespace {

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.collectives"); }

void finish_with(const std::shared_ptr<Work>& work, std::exception_ptr error) {
  try {
    work->finish_with_error(std::move(error));
  } catch (const std::exception& e) {
    logger()->warn("nccl p2p: could not complete {}: {}", work->what(), e.what());
  }
}

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

NcclP2P::NcclP2P(Config config) : config_(std::move(config)) {
  thread_ = std::thread([this] { loop(); });
}

NcclP2P::~NcclP2P() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NcclP2P::post(bool is_send, const Tensor& buffer, int peer, Millis timeout, std::shared_ptr<Work> work) {
  Op op;
  op.is_send = is_send;
  op.peer = peer;
  op.buffer = buffer;
  op.deadline = Deadline::after(timeout);
  op.work = std::move(work);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      incoming_.push_back(std::move(op));
      op.work = nullptr;
    }
  }
  if (op.work) {
    finish_with(op.work, std::make_exception_ptr(CommError(
                                   fmt::format("{}: refused: the nccl group is shutting down", op.work->what()))));
    return;
  }
  cv_.notify_one();
}

void NcclP2P::loop() {
  Backoff backoff;
  bool busy = false;
  for (;;) {
    std::vector<Op> incoming;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto wake = [&] { return stop_ || !incoming_.empty(); };
      if (!busy) {
        cv_.wait(lock, wake);  // idle: nothing has a deadline until something is posted
      } else if (const auto d = backoff.step(); d.count() > 0) {
        cv_.wait_for(lock, d, wake);
      }
      if (stop_) break;
      incoming.swap(incoming_);
    }
    bool changed = !incoming.empty();
    for (Op& op : incoming) {
      auto& slot = pairs_[op.peer];
      if (!slot) {
        slot = std::make_unique<Pair>();
        slot->peer = op.peer;
        const int lo = std::min(config_.rank, op.peer);
        const int hi = std::max(config_.rank, op.peer);
        slot->index = config_.rank == lo ? 0 : 1;
        slot->key = fmt::format("nccl/p2p/{}-{}", lo, hi);
        slot->name = fmt::format("group '{}' p2p {}-{}", config_.group, lo, hi);
      }
      if (slot->state == Pair::State::kBroken) {
        finish_with(op.work, std::make_exception_ptr(CommError(fmt::format(
                                       "{}: refused: the p2p communicator with rank {} broke earlier: {}",
                                       op.work->what(), op.peer, slot->failure))));
        continue;
      }
      slot->waiting.push_back(std::move(op));
    }
    busy = false;
    for (auto& [peer, pair] : pairs_) {
      changed = advance(*pair) || changed;
      busy = busy || !pair->waiting.empty() || !pair->issued.empty();
    }
    if (changed) backoff.reset();
  }
  shut_down();
}

bool NcclP2P::advance(Pair& pair) {
  if (pair.waiting.empty() && pair.issued.empty()) return false;
  bool changed = false;
  try {
    DeviceGuard guard(config_.device);
    if (pair.state != Pair::State::kReady) {
      const auto before = pair.state;
      set_up(pair);
      changed = pair.state != before;
    }
    if (pair.state == Pair::State::kReady && !pair.waiting.empty()) {
      issue(pair);
      changed = true;
    }
    changed = complete_finished(pair) || changed;
    if (!pair.issued.empty()) pair.comm->check_healthy(pair.issued.front().work->what());
    check_deadlines(pair);
  } catch (...) {
    break_pair(pair, std::current_exception());
    changed = true;
  }
  return changed;
}

void NcclP2P::set_up(Pair& pair) {
  const std::string& what = pair.waiting.front().work->what();
  if (pair.state == Pair::State::kNew) {
    if (config_.size == 1) BRAID_THROW(InternalError, "{}: p2p in a group of one rank", what);
    BRAID_CHECK_TYPED(InvalidArgument, config_.store != nullptr, "{}: the nccl backend needs a store for p2p", what);
    if (pair.index == 0) {
      const ncclUniqueId id = publish_unique_id(*config_.store, pair.key);
      pair.comm = std::make_shared<NcclComm>(2, 0, id, config_.device, pair.name);
      pair.state = Pair::State::kInitializing;
    } else {
      pair.state = Pair::State::kWaitingForId;
    }
  }
  if (pair.state == Pair::State::kWaitingForId) {
    if (auto id = try_read_unique_id(*config_.store, pair.key)) {
      pair.comm = std::make_shared<NcclComm>(2, 1, *id, config_.device, pair.name);
      pair.state = Pair::State::kInitializing;
    }
  }
  if (pair.state == Pair::State::kInitializing && pair.comm->poll_ready(what)) {
    pair.stream = std::make_unique<CudaStream>(config_.device);
    pair.inputs_ready = std::make_unique<CudaEvent>();
    pair.state = Pair::State::kReady;
    logger()->debug("nccl p2p communicator {} is ready", pair.name);
  }
}

void NcclP2P::issue(Pair& pair) {
  const int peer_in_comm = 1 - pair.index;
  cudaStream_t stream = pair.stream->get();
  order_after_default_stream(stream, pair.inputs_ready->get(), pair.waiting.front().work->what());
  while (!pair.waiting.empty()) {
    Op& op = pair.waiting.front();
    const std::string& what = op.work->what();
    const auto count = static_cast<size_t>(op.buffer.numel());
    const ncclDataType_t dtype = to_nccl(op.buffer.dtype());
    void* data = op.buffer.data_ptr();
    if (count > 0) {
      pair.comm->run(what, op.is_send ? "ncclSend" : "ncclRecv", op.deadline, [&](ncclComm_t comm) {
        return op.is_send ? ncclSend(data, count, dtype, peer_in_comm, comm, stream)
                          : ncclRecv(data, count, dtype, peer_in_comm, comm, stream);
      });
    }
    op.done = std::make_unique<CudaEvent>();
    check_cuda(cudaEventRecord(op.done->get(), stream), "cudaEventRecord", what);
    pair.issued.push_back(std::move(op));
    pair.waiting.pop_front();
  }
}

bool NcclP2P::complete_finished(Pair& pair) {
  bool changed = false;
  while (!pair.issued.empty()) {
    Op& op = pair.issued.front();
    const cudaError_t q = cudaEventQuery(op.done->get());
    if (q == cudaErrorNotReady) break;
    check_cuda(q, "cudaEventQuery", op.work->what());
    Op finished = std::move(op);
    pair.issued.pop_front();
    changed = true;
    try {
      if (!finished.is_send) finished.work->set_source_rank(finished.peer);
      finished.work->finish({finished.buffer});
    } catch (const std::exception& e) {
      logger()->warn("nccl p2p: completing {} failed: {}", finished.work->what(), e.what());
    }
  }
  return changed;
}

void NcclP2P::check_deadlines(Pair& pair) {
  // Ops of a pair complete in order, so only the oldest one can be the first to run out of time.
  const Op* oldest = !pair.issued.empty() ? &pair.issued.front() : (!pair.waiting.empty() ? &pair.waiting.front() : nullptr);
  if (oldest == nullptr || !oldest->deadline.expired()) return;
  const char* where = pair.state != Pair::State::kReady
                          ? (pair.state == Pair::State::kWaitingForId ? "waiting for the peer to publish the NCCL id of "
                                                                        "the pair communicator"
                                                                      : "setting up the pair communicator")
                          : (oldest->is_send ? "waiting for the peer to receive" : "waiting for the peer to send");
  BRAID_THROW(TimeoutError, "{}: timed out {} (rank {} never matched it)", oldest->work->what(), where, pair.peer);
}

void NcclP2P::break_pair(Pair& pair, std::exception_ptr error) {
  const std::string first = message_of(error);
  pair.failure = first;
  pair.state = Pair::State::kBroken;
  auto keepalive = std::make_shared<std::vector<Tensor>>();
  std::vector<std::shared_ptr<Work>> works;
  for (auto* q : {&pair.issued, &pair.waiting}) {
    for (Op& op : *q) {
      keepalive->push_back(op.buffer);
      works.push_back(op.work);
    }
    q->clear();
  }
  if (pair.comm) {
    config_.watchdog->abort_async(pair.comm, fmt::format("p2p failed: {}", first), keepalive);
    pair.comm.reset();
  }
  for (size_t i = 0; i < works.size(); ++i) {
    finish_with(works[i],
                i == 0 ? error
                       : std::make_exception_ptr(CommError(fmt::format(
                             "{}: not completed: an earlier p2p op with rank {} failed: {}", works[i]->what(), pair.peer,
                             first))));
  }
  logger()->error("nccl p2p with rank {} on group '{}' broke: {}", pair.peer, config_.group, first);
}

void NcclP2P::shut_down() {
  std::vector<Op> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(incoming_);
  }
  for (Op& op : incoming) {
    finish_with(op.work, std::make_exception_ptr(CommError(
                             fmt::format("{}: not completed: the nccl group was destroyed first", op.work->what()))));
  }
  for (auto& [peer, pair] : pairs_) {
    if (!pair->issued.empty() || !pair->waiting.empty()) {
      const std::string& what = (!pair->issued.empty() ? pair->issued.front() : pair->waiting.front()).work->what();
      break_pair(*pair, std::make_exception_ptr(CommError(
                            fmt::format("{}: not completed: the nccl group was destroyed first", what))));
    }
  }
  pairs_.clear();  // idle pair communicators are finalized and destroyed here
}

}  // namespace braid::collectives::nccl
