// Helpers of the TCP transport tests: a transport with the messages and failures it saw, and a raw socket
// that speaks (or mangles) the wire format.
#pragma once

#include <catch2/catch.hpp>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/tcp/tcp_transport.h"
#include "rpc/tcp/tcp_transport_impl.h"
#include "security/job_secret.h"
#include "tensor/factory.h"
#include "tests/support/raw_handshake.h"

namespace braid::rpc::test {

using namespace std::chrono_literals;

struct Received {
  int from = -1;
  Message msg;
};

// Polls `pred` until it holds or `timeout` passes.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// One started transport. By default it records every message and failure; `handler` replaces the
// recording of messages (e.g. an echo).
class Node {
 public:
  using Handler = std::function<void(Node& self, int from, Message msg)>;

  explicit Node(int id, TransportOptions options = {}, Handler handler = {})
      : id_(id), transport_(make_tcp_transport(options)), handler_(std::move(handler)) {
    TransportHandlers h;
    h.on_message = [this](int from, Message msg) {
      if (handler_) {
        handler_(*this, from, std::move(msg));
        return;
      }
      std::lock_guard lock(mu_);
      messages_.push_back({from, std::move(msg)});
      cv_.notify_all();
    };
    h.on_peer_failure = [this](int peer, const std::string& reason) {
      std::lock_guard lock(mu_);
      failures_.emplace_back(peer, reason);
      cv_.notify_all();
    };
    transport_->start(id, std::move(h));
  }
  ~Node() { transport_->shutdown(); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  int id() const { return id_; }
  Transport& transport() { return *transport_; }
  tcp_detail::TcpTransport& tcp() { return dynamic_cast<tcp_detail::TcpTransport&>(*transport_); }
  PeerInfo info() const { return PeerInfo{id_, "node" + std::to_string(id_), transport_->local_address()}; }
  void send(int to, Message msg) { transport_->send(to, std::move(msg)); }

  bool wait_messages(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return messages_.size() >= n; });
  }
  bool wait_failures(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return failures_.size() >= n; });
  }
  std::vector<Received> messages() {
    std::lock_guard lock(mu_);
    return messages_;
  }
  std::vector<std::pair<int, std::string>> failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

 private:
  int id_;
  std::unique_ptr<Transport> transport_;
  Handler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> messages_;
  std::vector<std::pair<int, std::string>> failures_;
};

// Tells every node about every other one.
inline void introduce(const std::vector<Node*>& nodes) {
  for (Node* n : nodes) {
    std::vector<PeerInfo> peers;
    for (Node* other : nodes) {
      if (other != n) peers.push_back(other->info());
    }
    n->transport().add_peers(peers);
  }
}

inline Message make_message(uint64_t id, std::vector<Tensor> tensors = {}, std::string meta = {},
                            MessageType type = MessageType::kCall) {
  Message m;
  m.type = type;
  m.id = id;
  m.meta.assign(meta.begin(), meta.end());
  m.tensors = std::move(tensors);
  return m;
}

inline std::string meta_text(const Message& m) { return std::string(m.meta.begin(), m.meta.end()); }
inline std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// A whole frame as bytes, as a transport would write it.
inline std::vector<uint8_t> frame_of(const Message& m) {
  std::vector<uint8_t> bytes;
  frame_prefix(m, bytes);
  for (const auto span : payload_spans(m)) bytes.insert(bytes.end(), span.begin(), span.end());
  return bytes;
}

inline std::vector<uint8_t> hello_from(uint64_t worker) {
  return frame_of(make_message(worker, {}, {}, MessageType::kHello));
}

// A plain socket to a transport, for feeding it bytes it must refuse.
class RawClient {
 public:
  // Connects and, with `authenticate`, proves the process's job secret as a transport would; then the
  // test may send anything. Without it the test plays a stranger.
  explicit RawClient(const std::vector<uint8_t>& address, bool authenticate = true) : socket_(io_) {
    const std::string text(address.begin(), address.end());
    const size_t colon = text.rfind(':');
    const boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address(text.substr(0, colon)),
                                            static_cast<uint16_t>(std::stoi(text.substr(colon + 1))));
    socket_.connect(ep);
    if (authenticate) {
      REQUIRE(testing::raw_client_handshake(socket_, security::job_secret(), security::Service::kRpcTcp));
    }
  }
  // Not connected: RawListener::accept() fills it.
  RawClient() : socket_(io_) {}
  boost::asio::ip::tcp::socket& socket() { return socket_; }
  void write(const std::vector<uint8_t>& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }

  // Reads exactly n bytes; an empty vector when they do not come within `timeout`.
  std::vector<uint8_t> read(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::vector<uint8_t> buf(n);
    boost::system::error_code result = boost::asio::error::timed_out;
    bool done = false;
    boost::asio::async_read(socket_, boost::asio::buffer(buf), [&](const boost::system::error_code& ec, size_t) {
      done = true;
      result = ec;
    });
    run_for(timeout, done);
    return done && !result ? buf : std::vector<uint8_t>{};
  }

  // Whether the transport closed this socket within `timeout` (a read ends with EOF or a reset rather
  // than data or nothing).
  bool closed_within(std::chrono::milliseconds timeout = 5000ms) {
    uint8_t byte = 0;
    boost::system::error_code result;
    bool done = false;
    socket_.async_read_some(boost::asio::buffer(&byte, 1), [&](const boost::system::error_code& ec, size_t) {
      done = true;
      result = ec;
    });
    run_for(timeout, done);
    return done && (result == boost::asio::error::eof || result == boost::asio::error::connection_reset);
  }

 private:
  void run_for(std::chrono::milliseconds timeout, const bool& done) {
    io_.restart();
    io_.run_for(timeout);
    if (!done) {
      boost::system::error_code ec;
      socket_.cancel(ec);
      io_.restart();
      io_.run();
    }
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
};

// A listening socket that plays a peer's address without speaking for it.
class RawListener {
 public:
  RawListener() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) { acceptor_.non_blocking(true); }
  std::vector<uint8_t> address() const {
    const std::string text = "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
    return {text.begin(), text.end()};
  }
  // The next incoming connection, authenticated as a transport would (with `authenticate`); nullptr when
  // none comes within `timeout`.
  std::unique_ptr<RawClient> accept(std::chrono::milliseconds timeout = 5000ms, bool authenticate = true) {
    auto client = std::make_unique<RawClient>();
    const bool ok = eventually([&] {
      boost::system::error_code ec;
      acceptor_.accept(client->socket(), ec);
      return !ec;
    }, timeout);
    if (!ok) return nullptr;
    if (authenticate) {
      client->socket().non_blocking(false);
      REQUIRE(testing::raw_server_handshake(client->socket(), security::job_secret(), security::Service::kRpcTcp));
    }
    return client;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

// Reads one whole frame from `raw`: its header and its decoded body (tensors filled).
inline std::pair<FrameHeader, Message> read_frame(RawClient& raw) {
  const auto header = raw.read(kFrameHeaderBytes);
  REQUIRE(header.size() == kFrameHeaderBytes);
  const FrameHeader h = decode_header(header, WireLimits{});
  std::vector<uint8_t> rest;
  if (h.body_bytes() + h.payload_bytes > 0) {
    rest = raw.read(h.body_bytes() + h.payload_bytes);
    REQUIRE(rest.size() == h.body_bytes() + h.payload_bytes);
  }
  Message msg = decode_body(h, std::span<const uint8_t>(rest).first(h.body_bytes()));
  size_t at = h.body_bytes();
  for (const auto span : receive_spans(msg)) {
    std::memcpy(span.data(), rest.data() + at, span.size());
    at += span.size();
  }
  return {h, std::move(msg)};
}

// Says hello as worker `worker` and checks the answer: a hello from worker `expect`.
inline void handshake(RawClient& raw, uint64_t worker, uint64_t expect) {
  raw.write(hello_from(worker));
  const auto [h, msg] = read_frame(raw);
  CHECK(h.type == MessageType::kHello);
  CHECK(h.id == expect);
  CHECK(h.body_bytes() == 0);
  CHECK(h.payload_bytes == 0);
}

}  // namespace braid::rpc::test
