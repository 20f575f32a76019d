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
  std::unique_ptr<CudaEvent> done;  // recorded on the ch's stream once issued
};

struct NcclP2P::Channel {
  enum class State { kNew, kWaitingForId, kInitializing, kReady, kBroken };
  int peer = 0;
  bool sends = true;  // this rank's direction on the channel: all its ops are sends, or all are receives
  int index = 0;      // this rank's rank in the two-rank communicator (the sender is 0)
  std::string key;
  std::string name;
  State state = State::kNew;
  std::shared_ptr<NcclComm> comm;
  std::unique_ptr<CudaStream> stream;
  std::unique_ptr<CudaEvent> inputs_ready;
  std::deque<Op> waiting;  // posted, not issued yet (the communicator is being set up)
  std::deque<Op> issued;   // on the stream, completing in order
  std::string failure;     // why the ch broke
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
      auto& slot = channels_[{op.peer, op.is_send}];
      if (!slot) {
        slot = std::make_unique<Channel>();
        slot->peer = op.peer;
        slot->sends = op.is_send;
        slot->index = op.is_send ? 0 : 1;
        const int src = op.is_send ? config_.rank : op.peer;
        const int dst = op.is_send ? op.peer : config_.rank;
        slot->key = fmt::format("nccl/p2p/{}-to-{}", src, dst);
        slot->name = fmt::format("group '{}' p2p {}->{}", config_.group, src, dst);
      }
      if (slot->state == Channel::State::kBroken) {
        finish_with(op.work, std::make_exception_ptr(CommError(fmt::format(
                                       "{}: refused: the p2p communicator {} broke earlier: {}", op.work->what(),
                                       slot->name, slot->failure))));
        continue;
      }
      slot->waiting.push_back(std::move(op));
    }
    busy = false;
    for (auto& [key, channel] : channels_) {
      changed = advance(*channel) || changed;
      busy = busy || !channel->waiting.empty() || !channel->issued.empty();
    }
    if (changed) backoff.reset();
  }
  shut_down();
}

bool NcclP2P::advance(Channel& ch) {
  if (ch.waiting.empty() && ch.issued.empty()) return false;
  bool changed = false;
  try {
    DeviceGuard guard(config_.device);
    if (ch.state != Channel::State::kReady) {
      const auto before = ch.state;
      set_up(ch);
      changed = ch.state != before;
    }
    if (ch.state == Channel::State::kReady && !ch.waiting.empty()) {
      issue(ch);
      changed = true;
    }
    changed = complete_finished(ch) || changed;
    if (!ch.issued.empty()) ch.comm->check_healthy(ch.issued.front().work->what());
    check_deadlines(ch);
  } catch (...) {
    break_channel(ch, std::current_exception());
    changed = true;
  }
  return changed;
}

void NcclP2P::set_up(Channel& ch) {
  const std::string& what = ch.waiting.front().work->what();
  if (ch.state == Channel::State::kNew) {
    if (config_.size == 1) BRAID_THROW(InternalError, "{}: p2p in a group of one rank", what);
    BRAID_CHECK_TYPED(InvalidArgument, config_.store != nullptr, "{}: the nccl backend needs a store for p2p", what);
    if (ch.index == 0) {
      // The sender creates the channel's NCCL id; the receiver polls the store for it.
      const ncclUniqueId id = publish_unique_id(*config_.store, ch.key);
      ch.comm = std::make_shared<NcclComm>(2, 0, id, config_.device, ch.name);
      ch.state = Channel::State::kInitializing;
    } else {
      ch.state = Channel::State::kWaitingForId;
    }
  }
  if (ch.state == Channel::State::kWaitingForId) {
    if (auto id = try_read_unique_id(*config_.store, ch.key)) {
      ch.comm = std::make_shared<NcclComm>(2, 1, *id, config_.device, ch.name);
      ch.state = Channel::State::kInitializing;
    }
  }
  if (ch.state == Channel::State::kInitializing && ch.comm->poll_ready(what)) {
    ch.stream = std::make_unique<CudaStream>(config_.device);
    ch.inputs_ready = std::make_unique<CudaEvent>();
    ch.state = Channel::State::kReady;
    logger()->debug("nccl p2p communicator {} is ready", ch.name);
  }
}

void NcclP2P::issue(Channel& ch) {
  const int peer_in_comm = 1 - ch.index;
  cudaStream_t stream = ch.stream->get();
  order_after_default_stream(stream, ch.inputs_ready->get(), ch.waiting.front().work->what());
  while (!ch.waiting.empty()) {
    Op& op = ch.waiting.front();
    const std::string& what = op.work->what();
    const auto count = static_cast<size_t>(op.buffer.numel());
    const ncclDataType_t dtype = to_nccl(op.buffer.dtype());
    void* data = op.buffer.data_ptr();
    if (count > 0) {
      ch.comm->run(what, op.is_send ? "ncclSend" : "ncclRecv", op.deadline, [&](ncclComm_t comm) {
        return op.is_send ? ncclSend(data, count, dtype, peer_in_comm, comm, stream)
                          : ncclRecv(data, count, dtype, peer_in_comm, comm, stream);
      });
    }
    op.done = std::make_unique<CudaEvent>();
    check_cuda(cudaEventRecord(op.done->get(), stream), "cudaEventRecord", what);
    ch.issued.push_back(std::move(op));
    ch.waiting.pop_front();
  }
}

bool NcclP2P::complete_finished(Channel& ch) {
  bool changed = false;
  while (!ch.issued.empty()) {
    Op& op = ch.issued.front();
    const cudaError_t q = cudaEventQuery(op.done->get());
    if (q == cudaErrorNotReady) break;
    check_cuda(q, "cudaEventQuery", op.work->what());
    Op finished = std::move(op);
    ch.issued.pop_front();
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

void NcclP2P::check_deadlines(Channel& ch) {
  // Ops of a ch complete in order, so only the oldest one can be the first to run out of time.
  const Op* oldest = !ch.issued.empty() ? &ch.issued.front() : (!ch.waiting.empty() ? &ch.waiting.front() : nullptr);
  if (oldest == nullptr || !oldest->deadline.expired()) return;
  const char* where = ch.state != Channel::State::kReady
                          ? (ch.state == Channel::State::kWaitingForId
                                 ? "waiting for the sender to publish the NCCL id of the p2p communicator"
                                 : "setting up the p2p communicator")
                          : (oldest->is_send ? "waiting for the peer to receive" : "waiting for the peer to send");
  BRAID_THROW(TimeoutError, "{}: timed out {} (rank {} never matched it)", oldest->work->what(), where, ch.peer);
}

void NcclP2P::break_channel(Channel& ch, std::exception_ptr error) {
  const std::string first = message_of(error);
  ch.failure = first;
  ch.state = Channel::State::kBroken;
  auto keepalive = std::make_shared<std::vector<Tensor>>();
  std::vector<std::shared_ptr<Work>> works;
  for (auto* q : {&ch.issued, &ch.waiting}) {
    for (Op& op : *q) {
      keepalive->push_back(op.buffer);
      works.push_back(op.work);
    }
    q->clear();
  }
  if (ch.comm) {
    config_.watchdog->abort_async(ch.comm, fmt::format("p2p failed: {}", first), keepalive);
    ch.comm.reset();
  }
  for (size_t i = 0; i < works.size(); ++i) {
    finish_with(works[i],
                i == 0 ? error
                       : std::make_exception_ptr(CommError(fmt::format(
                             "{}: not completed: an earlier op on p2p communicator {} failed: {}", works[i]->what(), ch.name,
                             first))));
  }
  logger()->error("nccl p2p communicator {} broke: {}", ch.name, first);
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
  for (auto& [key, channel] : channels_) {
    if (!channel->issued.empty() || !channel->waiting.empty()) {
      const std::string& what =
          (!channel->issued.empty() ? channel->issued.front() : channel->waiting.front()).work->what();
      break_channel(*channel, std::make_exception_ptr(CommError(
                                  fmt::format("{}: not completed: the nccl group was destroyed first", what))));
    }
  }
  channels_.clear();  // idle channel communicators are finalized and destroyed here
}

}  // namespace braid::collectives::nccl
