#include "store/tcp_store_server.h"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include <deque>
#include <map>
#include <set>

#include "base/check.h"
#include "base/logging.h"
#include "security/asio_handshake.h"
#include "security/listen_address.h"
#include "store/tcp_protocol.h"
#include "store/tcp_store_request.h"

namespace braid::store {

namespace asio = boost::asio;
using asio::ip::tcp;
using wire::Command;

namespace {

// Where the master listens when told `host` (docs/SECURITY.md, "Exposure"): never on every interface
// unless BRAID_BIND_ANY asks. An address as given; "localhost" as 127.0.0.1; with BRAID_SOCKET_IFNAME, that
// interface's address; a host name (Slurm's first node, a MASTER_ADDR such as "node01") on its first
// address that is not loopback, which is where the other hosts reach it. Debian maps a machine's own name
// to 127.0.1.1 on that machine: a name with only loopback addresses here is bound there, and the log says
// that other hosts cannot reach it.
asio::ip::address listen_address(const std::string& host) {
  if (host == "localhost") return asio::ip::make_address_v4("127.0.0.1");
  boost::system::error_code ec;
  const auto literal = asio::ip::make_address(host, ec);
  if (!ec) return literal;
  if (security::bind_any_requested()) return asio::ip::address_v4::any();
  const std::string chosen = security::listen_host("");
  if (!chosen.empty()) return asio::ip::make_address(chosen);
  asio::io_context io;
  tcp::resolver resolver(io);
  const auto found = resolver.resolve(host, "", ec);
  if (ec || found.empty()) {
    BRAID_THROW(CommError, "TCPStore server: cannot resolve the host name '{}': {}", host,
                ec ? ec.message() : "no address");
  }
  for (const auto& entry : found) {
    if (!entry.endpoint().address().is_loopback()) return entry.endpoint().address();
  }
  const auto loopback = found.begin()->endpoint().address();
  logging::get("braid.store")->info(
      "TCPStore server: '{}' resolves only to loopback ({}) here, so the store listens there and other hosts "
      "cannot reach it; a job across hosts sets MASTER_ADDR to an address or BRAID_SOCKET_IFNAME", host,
      loopback.to_string());
  return loopback;
}

}  // namespace

class TcpStoreServer::Impl : public std::enable_shared_from_this<TcpStoreServer::Impl> {
 public:
  Impl(const std::string& host, uint16_t port, security::JobSecret secret, Millis handshake_timeout)
      : acceptor_(io_), secret_(std::move(secret)), handshake_timeout_(handshake_timeout) {
    const tcp::endpoint ep(listen_address(host), port);
    boost::system::error_code ec;
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) BRAID_THROW(CommError, "TCPStore server: cannot listen on {}:{}: {}", host, port, ec.message());
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  asio::io_context& io() { return io_; }
  void start() { accept_from_loop(); }
  void stop();
  // After the loop thread is gone: drops the sessions and waiters and runs the handlers stop() left
  // queued (they complete as aborted), so that none keeps the server alive through its own io_context.
  void release_after_loop();

 private:
  class Session;
  struct Waiter {
    std::weak_ptr<Session> session;
    std::vector<std::string> keys;
  };

  void accept_from_loop();
  // Applies a decoded request (store/tcp_store_request.h) and returns the response body.
  Bytes handle_from_loop(const std::shared_ptr<Session>& s, wire::Request& req, bool& deferred);
  bool has_all_from_loop(const std::vector<std::string>& keys) const {
    for (const auto& k : keys) {
      if (data_.find(k) == data_.end()) return false;
    }
    return true;
  }
  void wake_waiters_from_loop();
  void set_from_loop(const std::string& key, Bytes value) {
    data_[key] = std::move(value);
    wake_waiters_from_loop();
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  const security::JobSecret secret_;
  const Millis handshake_timeout_;
  std::map<std::string, Bytes> data_;
  std::deque<Waiter> waiters_;
  std::set<std::shared_ptr<Session>> sessions_;
};

// One client connection: strict request/response, except that a Wait parks the session until its keys
// exist; meanwhile a one-byte read detects the client hanging up (it never sends during a wait).
class TcpStoreServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Impl& server, tcp::socket socket) : server_(server), socket_(std::move(socket)), timer_(server.io_) {
    boost::system::error_code ec;
    const auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("an unknown address") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
  }

  // Nothing is read from the client, and no frame is sized, before it proved it holds the job secret.
  void start() {
    timer_.expires_after(server_.handshake_timeout_);
    timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || self->authenticated_) return;
      self->refuse(fmt::format("no authentication within {} ms", self->server_.handshake_timeout_.count()));
    });
    security::async_server_handshake(socket_, server_.secret_, security::Service::kStore,
                                     [self = shared_from_this()](const security::HandshakeResult& r) {
                                       if (self->closed_) return;
                                       if (!r.ok()) return self->refuse("authentication failed: " + r.describe());
                                       self->authenticated_ = true;
                                       self->timer_.cancel();
                                       self->read_header();
                                     });
  }
  void close() {
    closed_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    socket_.close(ec);
  }
  void reply(Bytes body) {
    auto frame = std::make_shared<Bytes>();
    const auto n = static_cast<uint32_t>(body.size());
    frame->resize(4);
    std::memcpy(frame->data(), &n, 4);
    frame->insert(frame->end(), body.begin(), body.end());
    asio::async_write(socket_, asio::buffer(*frame), [self = shared_from_this(), frame](auto ec, size_t) {
      if (ec) return self->drop("write failed: " + ec.message());
      self->read_header();
    });
  }
  void watch_for_hangup() {
    waiting_ = true;
    const uint64_t generation = ++wait_generation_;
    socket_.async_read_some(asio::buffer(probe_), [self = shared_from_this(), generation](auto ec, size_t) {
      // end_wait() cancelled this probe (possibly before a later wait began): not a hang-up.
      if (ec == asio::error::operation_aborted && (!self->waiting_ || generation != self->wait_generation_)) return;
      // Either the client closed (the normal case after a client-side timeout) or it broke protocol.
      self->drop(ec ? "client left while waiting" : "client sent data while waiting");
    });
  }
  // The keys arrived: cancel the hang-up probe so that the next request read does not race it.
  void end_wait() {
    waiting_ = false;
    boost::system::error_code ec;
    socket_.cancel(ec);
  }

 private:
  void read_header() {
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](auto ec, size_t) {
      if (ec) return self->drop("");
      uint32_t magic = 0, len = 0;
      std::memcpy(&magic, self->header_.data(), 4);
      std::memcpy(&len, self->header_.data() + 4, 4);
      if (magic != wire::kMagic) return self->drop(fmt::format("bad magic 0x{:08x}", magic));
      if (len == 0 || len > wire::kMaxBody) return self->drop(fmt::format("bad body length {}", len));
      self->expected_ = len;
      self->body_.clear();
      self->read_body();
    });
  }
  // The body grows as its bytes arrive, a chunk at a time: a header that claims a large body costs only
  // what the client really sends (kMaxBody bounds the rest).
  void read_body() {
    const size_t have = body_.size();
    const size_t chunk = std::min<size_t>(expected_ - have, kBodyChunk);
    body_.resize(have + chunk);
    asio::async_read(socket_, asio::buffer(body_.data() + have, chunk), [self = shared_from_this()](auto ec, size_t) {
      if (ec) return self->drop("connection lost mid-frame: " + ec.message());
      if (self->body_.size() < self->expected_) return self->read_body();
      self->dispatch();
    });
  }
  void dispatch() {
    std::string why;
    auto req = wire::decode_request(body_, why);
    if (!req) return reply(wire::error_response(why));
    bool deferred = false;
    Bytes out = server_.handle_from_loop(shared_from_this(), *req, deferred);
    if (!deferred) reply(std::move(out));
  }
  // An unauthenticated client learns nothing: the connection just closes.
  void refuse(const std::string& why) {
    if (closed_) return;
    logging::get("braid.store")->warn("TCPStore server: refused a connection from {}: {}", peer_, why);
    close();
    server_.sessions_.erase(shared_from_this());
  }
  void drop(const std::string& why) {
    if (!why.empty() && why.find("while waiting") == std::string::npos) {
      logging::get("braid.store")->error("TCPStore server: closing connection: {}", why);
    }
    close();
    server_.sessions_.erase(shared_from_this());
  }

  Impl& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  bool authenticated_ = false;
  bool closed_ = false;
  std::array<uint8_t, 8> header_{};
  std::array<uint8_t, 1> probe_{};
  bool waiting_ = false;
  uint64_t wait_generation_ = 0;
  static constexpr size_t kBodyChunk = size_t{1} << 20;
  size_t expected_ = 0;  // the current frame's body length, from its header
  Bytes body_;
};

void TcpStoreServer::Impl::stop() {
  asio::post(io_, [self = shared_from_this()] {
    boost::system::error_code ec;
    self->acceptor_.close(ec);
    for (auto& s : self->sessions_) s->close();
    self->io_.stop();
  });
}

void TcpStoreServer::Impl::accept_from_loop() {
  acceptor_.async_accept([self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
    if (ec) return;  // acceptor closed
    socket.set_option(tcp::no_delay(true), ec);
    auto session = std::make_shared<Session>(*self, std::move(socket));
    self->sessions_.insert(session);
    session->start();
    self->accept_from_loop();
  });
}

void TcpStoreServer::Impl::wake_waiters_from_loop() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto session = it->session.lock();
    if (!session) {
      it = waiters_.erase(it);
    } else if (has_all_from_loop(it->keys)) {
      wire::Writer w;
      w.u8(0);
      it = waiters_.erase(it);
      session->end_wait();
      session->reply(std::move(w.buffer()));
    } else {
      ++it;
    }
  }
}

Bytes TcpStoreServer::Impl::handle_from_loop(const std::shared_ptr<Session>& s, wire::Request& req, bool& deferred) {
  wire::Writer w;
  switch (req.command) {
    case Command::Set: {
      set_from_loop(req.key, std::move(req.value));
      w.u8(0);
      return std::move(w.buffer());
    }
    case Command::Get: {
      auto it = data_.find(req.key);
      w.u8(0);
      w.u8(it != data_.end() ? 1 : 0);
      w.bytes(it != data_.end() ? it->second : Bytes{});
      return std::move(w.buffer());
    }
    case Command::Add: {
      int64_t v = 0;
      auto it = data_.find(req.key);
      if (it != data_.end()) {
        try {
          v = parse_counter(req.key, it->second);
        } catch (const std::exception& e) {
          return wire::error_response(e.what());
        }
      }
      v += req.delta;
      set_from_loop(req.key, to_bytes(std::to_string(v)));
      w.u8(0);
      w.i64(v);
      return std::move(w.buffer());
    }
    case Command::CompareSet: {
      auto it = data_.find(req.key);
      Bytes result;
      if (it == data_.end() && !req.expected.empty()) {
        result = req.expected;
      } else if (it != data_.end() && it->second != req.expected) {
        result = it->second;
      } else {
        result = req.value;
        set_from_loop(req.key, std::move(req.value));
      }
      w.u8(0);
      w.bytes(result);
      return std::move(w.buffer());
    }
    case Command::Check: {
      w.u8(0);
      w.u8(has_all_from_loop(req.keys) ? 1 : 0);
      return std::move(w.buffer());
    }
    case Command::Delete: {
      w.u8(0);
      w.u8(data_.erase(req.key) > 0 ? 1 : 0);
      return std::move(w.buffer());
    }
    case Command::NumKeys: {
      w.u8(0);
      w.i64(static_cast<int64_t>(data_.size()));
      return std::move(w.buffer());
    }
    case Command::Wait: {
      if (has_all_from_loop(req.keys)) {
        w.u8(0);
        return std::move(w.buffer());
      }
      waiters_.push_back({s, std::move(req.keys)});
      s->watch_for_hangup();
      deferred = true;
      return {};
    }
    case Command::MultiGet: {
      if (!has_all_from_loop(req.keys)) return wire::error_response("multi_get: some keys are missing");
      w.u8(0);
      w.u32(static_cast<uint32_t>(req.keys.size()));
      for (const auto& k : req.keys) w.bytes(data_[k]);
      return std::move(w.buffer());
    }
    case Command::MultiSet: {
      for (auto& [k, v] : req.pairs) data_[k] = std::move(v);
      wake_waiters_from_loop();
      w.u8(0);
      return std::move(w.buffer());
    }
  }
  return wire::error_response("unknown command");  // decode_request() admits only the commands above
}

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, security::JobSecret secret,
                               Millis handshake_timeout)
    : impl_(std::make_shared<Impl>(host, port, std::move(secret), handshake_timeout)) {
  port_ = impl_->port();
  impl_->start();
  loop_thread_ = std::thread([impl = impl_] {
    try {
      impl->io().run();
    } catch (const std::exception& e) {
      logging::get("braid.store")->critical("TCPStore server loop died: {}", e.what());
    }
  });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  impl_->release_after_loop();
}

void TcpStoreServer::Impl::release_after_loop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  for (auto& s : sessions_) s->close();
  sessions_.clear();
  waiters_.clear();
  io_.restart();
  io_.poll();
}

}  // namespace braid::store
