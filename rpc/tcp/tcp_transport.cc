// TcpTransport: listening, threads, peers, send() and shutdown(). The per-peer connection state machine
// (handshake verdicts, retries, failures) is in tcp_transport_peers.cc.
#include "rpc/tcp/tcp_transport.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/tcp/tcp_address.h"
#include "rpc/tcp/tcp_transport_impl.h"

namespace braid::rpc {

std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options) {
  return std::make_unique<tcp_detail::TcpTransport>(options);
}

}  // namespace braid::rpc

namespace braid::rpc::tcp_detail {

TcpTransport::TcpTransport(const TransportOptions& options)
    : options_(options),
      secret_(options.secret ? *options.secret : security::job_secret()),
      accept_strand_(asio::make_strand(io_)),
      acceptor_(accept_strand_),
      accept_retry_timer_(accept_strand_),
      self_strand_(asio::make_strand(io_)) {
  BRAID_CHECK_ARG(options.io_threads >= 1 && options.io_threads <= 64,
                  "tcp transport: io_threads must be in 1..64, got {}", options.io_threads);
  BRAID_CHECK_ARG(options.bind_port >= 0 && options.bind_port <= 65535,
                  "tcp transport: bind_port must be in 0..65535, got {}", options.bind_port);
  BRAID_CHECK_ARG(options.connect_retries >= 1, "tcp transport: connect_retries must be >= 1, got {}",
                  options.connect_retries);
  BRAID_CHECK_ARG(options.connect_backoff.count() >= 0 && options.connect_backoff_max >= options.connect_backoff,
                  "tcp transport: need 0 <= connect_backoff ({} ms) <= connect_backoff_max ({} ms)",
                  options.connect_backoff.count(), options.connect_backoff_max.count());
  const tcp::endpoint ep = resolve_endpoint(HostPort{options.bind_host, static_cast<uint16_t>(options.bind_port)},
                                            "tcp transport: bind_host");
  boost::system::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    BRAID_THROW(CommError, "tcp transport: cannot listen on {}:{}: {}", options.bind_host, options.bind_port,
                ec.message());
  }
  const tcp::endpoint local = acceptor_.local_endpoint();
  // Listening on every interface: publish the host name, which the other hosts can resolve.
  address_ = local.address().is_unspecified() ? fmt::format("{}:{}", asio::ip::host_name(), local.port())
                                              : endpoint_text(local);
}

TcpTransport::~TcpTransport() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    logging::get("braid.rpc")->critical("tcp transport: shutdown in the destructor failed: {}", e.what());
  }
}

std::vector<uint8_t> TcpTransport::local_address() const { return {address_.begin(), address_.end()}; }

std::string TcpTransport::describe_address(const std::vector<uint8_t>& address) const {
  if (address.empty()) return "(empty tcp address)";
  return std::string(address.begin(), address.end());
}

bool TcpTransport::on_io_thread() const {
  const auto me = std::this_thread::get_id();
  for (const auto& t : threads_) {
    if (t.get_id() == me) return true;
  }
  return false;
}

void TcpTransport::start(int self_id, TransportHandlers handlers) {
  std::lock_guard life(life_mu_);
  BRAID_CHECK_TYPED(CommError, !shut_down_, "tcp transport: start() after shutdown()");
  BRAID_CHECK_ARG(!started_.load(), "tcp transport: start() called twice (worker {})", self_id_);
  BRAID_CHECK_ARG(self_id >= 0, "tcp transport: start(): worker id must be >= 0, got {}", self_id);
  self_id_ = self_id;
  handlers_ = std::move(handlers);
  work_.emplace(io_.get_executor());
  asio::post(accept_strand_, [this] { accept_from_loop(); });
  started_.store(true, std::memory_order_release);
  threads_.reserve(static_cast<size_t>(options_.io_threads));
  for (int i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          // Handlers catch their own errors; this is the last line that keeps the io thread alive.
          logging::get("braid.rpc")->critical("tcp transport (worker {}): an io handler threw: {}", self_id_, e.what());
        }
      }
    });
  }
  logging::get("braid.rpc")->debug("tcp transport: worker {} listening on {} with {} io thread(s)", self_id,
                                   address_, options_.io_threads);
}

void TcpTransport::add_peers(const std::vector<PeerInfo>& peers) {
  // Resolve everything first (a host name may block on DNS), then publish all or nothing.
  std::vector<tcp::endpoint> endpoints;
  endpoints.reserve(peers.size());
  for (const auto& p : peers) {
    const std::string what = fmt::format("tcp transport: add_peers: address of worker {} '{}'", p.id, p.name);
    BRAID_CHECK_ARG(p.id >= 0, "tcp transport: add_peers: worker '{}' has invalid id {}", p.name, p.id);
    const std::string text(p.address.begin(), p.address.end());
    endpoints.push_back(resolve_endpoint(parse_host_port(text, what), what));
  }
  std::unique_lock map_lock(peers_mu_);
  for (size_t i = 0; i < peers.size(); ++i) {
    auto& slot = peers_[peers[i].id];
    if (!slot) {
      slot = std::make_unique<Peer>(io_);
      slot->id = peers[i].id;
    }
    std::lock_guard lock(slot->mu);
    slot->name = peers[i].name;
    slot->address.assign(peers[i].address.begin(), peers[i].address.end());
    slot->endpoint = endpoints[i];
  }
}

TcpTransport::Peer* TcpTransport::find_peer(int id) const {
  std::shared_lock lock(peers_mu_);
  const auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : it->second.get();
}

void TcpTransport::send(int peer_id, Message msg) {
  if (!started_.load(std::memory_order_acquire)) {
    BRAID_THROW(CommError, "tcp transport: send {} #{} to worker {} before start()", message_type_name(msg.type),
                msg.id, peer_id);
  }
  if (peer_id == self_id_) {
    send_to_self(std::move(msg));
    return;
  }
  Peer* peer = find_peer(peer_id);
  if (peer == nullptr) {
    std::vector<int> known;
    {
      std::shared_lock lock(peers_mu_);
      for (const auto& [id, p] : peers_) known.push_back(id);
    }
    BRAID_THROW(InvalidArgument, "tcp transport: send {} #{} from worker {} to worker {}: not a known peer (known: [{}])",
                message_type_name(msg.type), msg.id, self_id_, peer_id, fmt::join(known, ", "));
  }
  OutFrame frame;
  frame.prefix = pool_.take();
  frame.msg = std::move(msg);
  frame_prefix(frame.msg, frame.prefix);  // WireError for a message that cannot be framed
  std::lock_guard lock(peer->mu);
  if (stopping_.load(std::memory_order_acquire)) {
    BRAID_THROW(CommError, "tcp transport: send {} #{} to worker {} after shutdown()", message_type_name(frame.msg.type),
                frame.msg.id, peer_id);
  }
  if (peer->active) {
    if (peer->active->send(frame)) return;
    peer->active.reset();  // closed under us (not expected: failures detach first); reconnect below
  }
  peer->pending.push_back(std::move(frame));
  if (!peer->connecting) {
    peer->connecting = true;
    peer->attempts = 0;
    connect_locked(*peer);
  }
}

void TcpTransport::send_to_self(Message msg) {
  // The same checks as the wire, and copies of the tensors: the receiver must not alias the sender's
  // storage, as it would not over the network.
  std::vector<uint8_t> prefix = pool_.take();
  frame_prefix(msg, prefix);
  pool_.give(std::move(prefix));
  for (auto& t : msg.tensors) t = t.clone();
  if (msg.requires_grad.empty()) msg.requires_grad.assign(msg.tensors.size(), 0);
  if (stopping_.load(std::memory_order_acquire)) {
    BRAID_THROW(CommError, "tcp transport: send {} #{} to worker {} (self) after shutdown()",
                message_type_name(msg.type), msg.id, self_id_);
  }
  asio::post(self_strand_, [this, m = std::move(msg)]() mutable {
    if (stopping_.load(std::memory_order_acquire)) return;
    try {
      handlers_.on_message(self_id_, std::move(m));
    } catch (const std::exception& e) {
      logging::get("braid.rpc")->error("tcp transport (worker {}): the message handler threw on a message to "
                                       "itself: {}", self_id_, e.what());
    }
  });
}

void TcpTransport::accept_from_loop() {
  acceptor_.async_accept(asio::make_strand(io_), [this](const boost::system::error_code& ec, Socket socket) {
    if (stopping_.load(std::memory_order_acquire) || ec == asio::error::operation_aborted || !acceptor_.is_open()) {
      return;
    }
    if (ec) {
      // E.g. out of file descriptors: pause instead of spinning on the error.
      logging::get("braid.rpc")->warn("tcp transport (worker {}): accept on {} failed: {}; retrying in 10 ms",
                                      self_id_, address_, ec.message());
      accept_retry_timer_.expires_after(std::chrono::milliseconds(10));
      accept_retry_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
        if (!wait_ec && !stopping_.load(std::memory_order_acquire)) accept_from_loop();
      });
      return;
    }
    try {
      auto conn = std::make_shared<TcpConnection>(context(), std::move(socket));
      if (register_connection(conn)) {
        conn->start_incoming();
      } else {
        conn->close();
      }
    } catch (const std::exception& e) {
      // The socket closes with its scope; the listener must go on accepting whatever happened.
      logging::get("braid.rpc")->error("tcp transport (worker {}): cannot set up an accepted connection: {}",
                                       self_id_, e.what());
    }
    accept_from_loop();
  });
}

bool TcpTransport::register_connection(const std::shared_ptr<TcpConnection>& conn) {
  std::lock_guard lock(conns_mu_);
  if (stopping_.load(std::memory_order_acquire)) return false;
  conns_.emplace(conn.get(), conn);
  return true;
}

void TcpTransport::on_closed(const TcpConnection& conn) {
  std::lock_guard lock(conns_mu_);
  conns_.erase(&conn);
}

size_t TcpTransport::connection_count() const {
  std::lock_guard lock(conns_mu_);
  return conns_.size();
}

void TcpTransport::shutdown() {
  std::lock_guard life(life_mu_);
  if (shut_down_) return;
  BRAID_CHECK_ARG(!on_io_thread(), "tcp transport (worker {}): shutdown() called from a transport handler; an io "
                  "thread cannot join itself", self_id_);
  shut_down_ = true;
  stopping_.store(true, std::memory_order_release);
  std::vector<std::shared_ptr<TcpConnection>> to_close;
  {
    // After each peer's lock was taken once here, no send() can start a connection or queue a frame.
    std::shared_lock map_lock(peers_mu_);
    for (auto& [id, peer] : peers_) {
      std::lock_guard lock(peer->mu);
      if (peer->active) to_close.push_back(std::move(peer->active));
      if (peer->outgoing) to_close.push_back(std::move(peer->outgoing));
      peer->active.reset();
      peer->outgoing.reset();
      peer->pending.clear();
      peer->connecting = false;
      ++peer->retry_generation;
      peer->retry_timer.cancel();
    }
  }
  {
    std::lock_guard lock(conns_mu_);
    for (const auto& [ptr, conn] : conns_) to_close.push_back(conn);
  }
  for (const auto& conn : to_close) conn->close();
  if (started_.load()) {
    asio::post(accept_strand_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      accept_retry_timer_.cancel();
    });
    // Every socket, timer and the acceptor is closed or cancelled, so the io threads run out of work
    // (the aborted handlers run first) and return.
    work_.reset();
    for (auto& t : threads_) t.join();
    threads_.clear();
  } else {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }
  to_close.clear();
  logging::get("braid.rpc")->debug("tcp transport: worker {} ({}) shut down", self_id_, address_);
}

}  // namespace braid::rpc::tcp_detail
