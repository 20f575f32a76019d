// UcxTransport: life cycle, the public calls, and the progress loop (wake-up, events, teardown). The
// endpoints, sends and failures are in ucx_connections.cc.
#include "rpc/ucx/ucx_transport.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sched.h>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/ucx/ucx_transport_impl.h"

namespace braid::rpc {

std::unique_ptr<Transport> make_ucx_transport(const TransportOptions& options) {
  return std::make_unique<ucx_detail::UcxTransport>(options);
}

}  // namespace braid::rpc

namespace braid::rpc::ucx_detail {

namespace {

constexpr size_t kPoolBuffers = 1024;            // prefix buffers kept for reuse
constexpr size_t kPoolBufferCapacity = 64 << 10;  // larger ones (a big meta) are freed, not kept
constexpr int kSleepMs = 100;                    // the longest single sleep; the loop re-checks after it

auto& log() { return *logging::get("braid.rpc"); }

}  // namespace

UcxTransport::UcxTransport(const TransportOptions& options, size_t fetch_budget)
    : options_(options),
      fetch_budget_(fetch_budget),
      secret_(options.secret ? *options.secret : security::job_secret()),
      nonce_(security::fresh_nonce()) {
  context_ = std::make_unique<UcxContext>(options_.bind_host);
  data_worker_ = std::make_unique<UcxWorker>(*context_);
  monitor_worker_ = std::make_unique<UcxWorker>(*context_);
  address_ = pack_addresses({data_worker_->address(), monitor_worker_->address(), nonce_});
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) BRAID_THROW(CommError, "ucx transport: eventfd failed: {}", std::strerror(errno));
}

UcxTransport::~UcxTransport() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    log().critical("ucx transport: shutdown in the destructor failed: {}", e.what());
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string UcxTransport::describe_address(const std::vector<uint8_t>& address) const {
  if (address.empty()) return "(empty ucx worker address)";
  // The bytes are binary (two packed ucp worker addresses): only their size says anything in a log.
  return fmt::format("ucx worker address ({} bytes)", address.size());
}

std::optional<security::Nonce> UcxTransport::peer_nonce(int peer) const {
  std::shared_lock lock(peers_mu_);
  const auto it = peers_.find(peer);
  if (it == peers_.end()) return std::nullopt;
  return it->second.address.nonce;
}

std::string UcxTransport::peer_label(int peer) const {
  std::shared_lock lock(peers_mu_);
  const auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.name.empty()) return fmt::format("worker {}", peer);
  return fmt::format("worker {} ({})", peer, it->second.name);
}

void UcxTransport::start(int self_id, TransportHandlers handlers) {
  std::lock_guard life(life_mu_);
  BRAID_CHECK_TYPED(CommError, !shut_down_, "ucx transport: start() after shutdown()");
  BRAID_CHECK_ARG(!started_.load(), "ucx transport: start() called twice (worker {})", self_id_);
  BRAID_CHECK_ARG(self_id >= 0, "ucx transport: start(): worker id must be >= 0, got {}", self_id);
  self_id_ = self_id;
  handlers_ = std::move(handlers);
  StreamAuth auth{secret_, nonce_, [this](int worker) { return peer_nonce(worker); }};
  receiver_ = std::make_unique<UcxReceiver>(data_worker_->get(), options_.limits, self_id, fetch_budget_,
                                            std::move(auth));
  receiver_->install();
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  param.id = kResetAmId;
  param.cb = [](void* arg, const void* header, size_t header_length, void* data, size_t length,
                const ucp_am_recv_param_t* p) {
    return static_cast<UcxTransport*>(arg)->on_reset(header, header_length, data, length, p);
  };
  param.arg = this;
  const ucs_status_t st = ucp_worker_set_am_recv_handler(data_worker_->get(), &param);
  if (st != UCS_OK) {
    BRAID_THROW(CommError, "ucx transport (worker {}): registering the reset handler failed: {}", self_id,
                status_text(st));
  }
  monitors_ = probe_monitor_support();
  // The workers and everything above now belong to the progress thread (its creation orders the hand-over).
  // Started before the thread runs: a request served by it can reply at once (a reply sent in between used
  // to fail with "before start()" and the caller timed out).
  started_.store(true, std::memory_order_release);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    started_.store(false, std::memory_order_release);
    throw;
  }
  log().debug("ucx transport: worker {} started ({})", self_id, describe_address(address_));
}

void UcxTransport::add_peers(const std::vector<PeerInfo>& peers) {
  std::vector<PeerEntry> entries;
  entries.reserve(peers.size());
  for (const auto& p : peers) {
    BRAID_CHECK_ARG(p.id >= 0, "ucx transport: add_peers: worker '{}' has invalid id {}", p.name, p.id);
    entries.push_back({p.name, unpack_addresses(p.address, fmt::format("ucx transport: add_peers: address of "
                                                                       "worker {} '{}'", p.id, p.name))});
  }
  std::unique_lock lock(peers_mu_);
  for (size_t i = 0; i < peers.size(); ++i) peers_[peers[i].id] = std::move(entries[i]);
}

void UcxTransport::send(int peer, Message msg) {
  if (!started_.load(std::memory_order_acquire)) {
    BRAID_THROW(CommError, "ucx transport: send {} #{} to worker {} before start()", message_type_name(msg.type),
                msg.id, peer);
  }
  if (peer != self_id_) {
    std::shared_lock lock(peers_mu_);
    if (peers_.find(peer) == peers_.end()) {
      std::vector<int> known;
      for (const auto& [id, entry] : peers_) known.push_back(id);
      std::sort(known.begin(), known.end());
      BRAID_THROW(InvalidArgument, "ucx transport: send {} #{} from worker {} to worker {}: not a known peer "
                  "(known: [{}])", message_type_name(msg.type), msg.id, self_id_, peer, fmt::join(known, ", "));
    }
  }
  Outgoing out;
  out.peer = peer;
  {
    std::lock_guard lock(queue_mu_);
    if (!buffer_pool_.empty()) {
      out.buffer = std::move(buffer_pool_.back());
      buffer_pool_.pop_back();
    }
  }
  frame_prefix(msg, out.buffer);  // WireError for a message that cannot be framed
  if (peer == self_id_) {
    // Copies of the tensors: the receiver must not alias the sender's storage, as it would not over the
    // network.
    for (auto& t : msg.tensors) t = t.clone();
    if (msg.requires_grad.empty()) msg.requires_grad.assign(msg.tensors.size(), 0);
  }
  out.msg = std::move(msg);
  {
    std::lock_guard lock(queue_mu_);
    if (stopping_) {
      BRAID_THROW(CommError, "ucx transport: send {} #{} to worker {} after shutdown()",
                  message_type_name(out.msg.type), out.msg.id, peer);
    }
    queue_.push_back(std::move(out));
  }
  // Pairs with sleep(): it publishes sleeping_ before looking at the queue, we look after queueing.
  if (sleeping_.load()) wake();
}

void UcxTransport::wake() {
  const uint64_t one = 1;
  // EAGAIN only when the counter is about to overflow: the thread is awake then anyway.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void UcxTransport::shutdown() {
  std::lock_guard life(life_mu_);
  if (shut_down_) return;
  BRAID_CHECK_ARG(!on_progress_thread(), "ucx transport (worker {}): shutdown() called from a transport handler; "
                  "the progress thread cannot join itself", self_id_);
  shut_down_ = true;
  {
    std::lock_guard lock(queue_mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) {
    stop_.store(true, std::memory_order_release);
    wake();
    thread_.join();
  } else {
    teardown();  // never started: no endpoint exists, only the workers to destroy
  }
  data_worker_.reset();
  monitor_worker_.reset();
  context_.reset();
  log().debug("ucx transport: worker {} shut down", self_id_);
}

void UcxTransport::run() {
  auto idle_since = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    bool busy = false;
    try {
      busy = drain_queue();
      busy = progress_workers() || busy;
      busy = handle_events() || busy;
    } catch (const std::exception& e) {
      // Every handler catches its own errors; this keeps the thread alive if something else throws.
      log().critical("ucx transport (worker {}): the progress loop caught: {}", self_id_, e.what());
    }
    const auto now = std::chrono::steady_clock::now();
    if (busy) {
      idle_since = now;
    } else if (now - idle_since >= kSpinBeforeSleep) {
      sleep();
      idle_since = std::chrono::steady_clock::now();
    } else {
      // Polling, but the core goes first to whoever is runnable: on a small machine the thread waiting
      // for this very message (the caller, the agent's workers) would otherwise wait for our time slice.
      sched_yield();
    }
  }
  try {
    teardown();
  } catch (const std::exception& e) {
    log().critical("ucx transport (worker {}): teardown failed: {}", self_id_, e.what());
  }
}

bool UcxTransport::progress_workers() {
  const bool data = data_worker_->progress();
  return monitor_worker_->progress() || data;
}

bool UcxTransport::drain_queue() {
  {
    std::lock_guard lock(queue_mu_);
    for (auto& b : returned_buffers_) {
      if (buffer_pool_.size() < kPoolBuffers && b.capacity() <= kPoolBufferCapacity) buffer_pool_.push_back(std::move(b));
    }
    returned_buffers_.clear();
    if (queue_.empty()) return false;
    batch_.clear();  // left over only if posting threw last time: those are not posted twice
    batch_.swap(queue_);
  }
  for (auto& out : batch_) {
    if (out.peer == self_id_) {
      returned_buffers_.push_back(std::move(out.buffer));
      deliver(self_id_, std::move(out.msg));
    } else {
      post(std::move(out));
    }
  }
  batch_.clear();
  return true;
}

bool UcxTransport::handle_events() {
  bool any = receiver_->pump();
  if (receiver_->has_events()) {
    any = true;
    // Deliveries first: they arrived before whatever the rejections are about.
    for (auto& d : receiver_->take_deliveries()) {
      // A peer that sends to us gets our endpoints too: its failure is then noticed, and UCX has an
      // endpoint with an error handler for the messages still queued from it if it dies. After a failure
      // only a new stream (a peer that came back) does, not what a dead peer left queued.
      Connection& c = connection(d.from);
      if (c.data == nullptr && (!c.failed || d.first_of_stream)) ensure_connected(c);
      deliver(d.from, std::move(d.msg));
    }
    for (auto& r : receiver_->take_rejections()) {
      const std::string who = peer_label(r.peer);
      if (r.malformed) {
        // The rest of that stream is dropped; the sender learns it from the reset, reports us and starts
        // a new stream. The endpoints stay (see Connection).
        log().error("ucx transport (worker {}): malformed frame from {}: {}; dropping it and the rest of its "
                    "stream", self_id_, who, r.reason);
        post_reset(r.peer, r.stream, r.reason);
        report_failure(r.peer, fmt::format("malformed frame from {}: {}", who, r.reason));
      } else {
        fail_peer(r.peer, fmt::format("receiving from {} failed: {}", who, r.reason));
      }
    }
  }
  if (!ep_errors_.empty()) {
    any = true;
    std::vector<EpError> errors;
    errors.swap(ep_errors_);
    for (auto& e : errors) {
      const auto it = connections_.find(e.peer);
      if (it != connections_.end() && it->second->generation == e.generation) fail_peer(e.peer, e.reason);
    }
  }
  if (!resets_.empty()) {
    any = true;
    std::vector<ResetNotice> resets;
    resets.swap(resets_);
    for (auto& r : resets) {
      const auto it = connections_.find(r.peer);
      if (it == connections_.end() || it->second->stream != r.stream) continue;
      new_stream(*it->second);
      report_failure(r.peer, fmt::format("{} dropped the messages of this worker: {}", peer_label(r.peer), r.reason));
    }
  }
  return any;
}

void UcxTransport::deliver(int from, Message msg) {
  if (!handlers_.on_message) return;
  try {
    handlers_.on_message(from, std::move(msg));
  } catch (const std::exception& e) {
    log().error("ucx transport (worker {}): the message handler threw on a message from {}: {}", self_id_,
                peer_label(from), e.what());
  }
}

void UcxTransport::sleep() {
  sleeping_.store(true);
  {
    std::lock_guard lock(queue_mu_);
    if (!queue_.empty()) {
      sleeping_.store(false);
      return;
    }
  }
  const UcxWorker::Armed data = data_worker_->arm();
  const UcxWorker::Armed monitor = data == UcxWorker::Armed::kBusy ? data : monitor_worker_->arm();
  if (monitor == UcxWorker::Armed::kBusy) {
    sleeping_.store(false);
    return;
  }
  const bool armed = data == UcxWorker::Armed::kYes && monitor == UcxWorker::Armed::kYes;
  pollfd fds[3] = {{data_worker_->event_fd(), POLLIN, 0}, {monitor_worker_->event_fd(), POLLIN, 0},
                   {wake_fd_, POLLIN, 0}};
  ::poll(fds, 3, armed ? kSleepMs : 1);
  sleeping_.store(false);
  if ((fds[2].revents & POLLIN) != 0) {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof(count));
  }
}

void UcxTransport::teardown() {
  tearing_down_ = true;
  {
    std::lock_guard lock(queue_mu_);
    queue_.clear();  // messages not yet handed to UCX are dropped
  }
  if (receiver_) receiver_->close();
  const auto deadline = std::chrono::steady_clock::now() + kCloseTimeout;
  auto progress_until = [&](const auto& done) {
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      if (!progress_workers()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  };
  // Sends and fetches in flight first: a rendezvous is over only when the receiver fetched the data,
  // and a peer must not be left with a fetch from a worker that is gone.
  // Sends to a peer that failed never complete (UCX does not cancel a rendezvous on an endpoint without
  // error handling): those are not waited for.
  auto live_sends = [&] {
    for (const auto& [raw, op] : in_flight_) {
      const auto it = connections_.find(op->peer);
      if (it != connections_.end() && !it->second->failed && it->second->generation == op->generation) return true;
    }
    return false;
  };
  progress_until([&] { return !live_sends() && (!receiver_ || receiver_->fetches_in_flight() == 0); });
  close_all_endpoints();
  progress_until([&] { return closing_.empty(); });
  if (!in_flight_.empty() || !closing_.empty()) {
    log().debug("ucx transport (worker {}): {} send(s) and {} endpoint close(s) did not finish within {} ms; "
                "destroying them", self_id_, in_flight_.size(), closing_.size(), kCloseTimeout.count());
  }
  release_requests();
  data_worker_->destroy();
  monitor_worker_->destroy();
  in_flight_.clear();
  connections_.clear();
}

}  // namespace braid::rpc::ucx_detail
