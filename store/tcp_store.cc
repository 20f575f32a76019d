#include "store/tcp_store.h"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include <thread>

#include "base/check.h"
#include "base/deadline.h"
#include "base/logging.h"
#include "security/asio_handshake.h"
#include "store/tcp_protocol.h"
#include "store/tcp_store_server.h"

namespace braid::store {

namespace asio = boost::asio;
using asio::ip::tcp;
using wire::Command;

namespace {
constexpr const char* kWorkersKey = "__braid_tcpstore/workers";
constexpr size_t kMaxIdleConnections = 8;
}  // namespace

// A blocking client connection with deadlines: each operation is started asynchronously and the private
// io_context runs until it completes or the deadline passes (then the socket is closed and the
// connection must be discarded).
class TCPStore::Connection {
 public:
  Connection(const std::string& host, uint16_t port, const security::JobSecret& secret, Deadline deadline)
      : socket_(io_) {
    std::string last_error = "no attempt";
    auto pause = Millis(10);
    while (true) {
      boost::system::error_code ec;
      tcp::resolver resolver(io_);
      auto endpoints = resolver.resolve(host, std::to_string(port), ec);
      if (!ec) {
        bool done = false;
        asio::async_connect(socket_, endpoints, [&](const boost::system::error_code& e, const tcp::endpoint&) {
          ec = e;
          done = true;
        });
        if (!run_until(done, deadline)) ec = asio::error::timed_out;
      }
      if (!ec) break;
      last_error = ec.message();
      reset_socket();
      if (deadline.expired()) {
        BRAID_THROW(TimeoutError, "TCPStore client: could not connect to {}:{} before the timeout (last error: {})",
                    host, port, last_error);
      }
      std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
      pause = std::min(pause * 2, Millis(200));
    }
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    authenticate(host, port, secret, deadline);
  }

  // Returns the response body, or nullopt when the deadline passed first.
  std::optional<Bytes> request(const Bytes& body, Deadline deadline) {
    uint32_t header[2] = {wire::kMagic, static_cast<uint32_t>(body.size())};
    std::array<asio::const_buffer, 2> out = {asio::buffer(header, sizeof(header)), asio::buffer(body)};
    boost::system::error_code ec;
    bool done = false;
    asio::async_write(socket_, out, [&](auto e, size_t) { ec = e; done = true; });
    if (!run_until(done, deadline)) return std::nullopt;
    if (ec) throw_comm("send", ec);

    uint32_t len = 0;
    done = false;
    asio::async_read(socket_, asio::buffer(&len, sizeof(len)), [&](auto e, size_t) { ec = e; done = true; });
    if (!run_until(done, deadline)) return std::nullopt;
    if (ec) throw_comm("receive", ec);
    if (len == 0 || len > wire::kMaxBody) {
      BRAID_THROW(CommError, "TCPStore client: server sent a malformed frame (body length {})", len);
    }
    Bytes response(len);
    done = false;
    asio::async_read(socket_, asio::buffer(response), [&](auto e, size_t) { ec = e; done = true; });
    if (!run_until(done, deadline)) return std::nullopt;
    if (ec) throw_comm("receive", ec);
    return response;
  }

 private:
  // A refusal is final (no retry): a server that does not share our secret will not start to.
  void authenticate(const std::string& host, uint16_t port, const security::JobSecret& secret, Deadline deadline) {
    security::HandshakeResult result;
    bool done = false;
    security::async_client_handshake(socket_, secret, security::Service::kStore,
                                     [&](const security::HandshakeResult& r) {
                                       result = r;
                                       done = true;
                                     });
    if (!run_until(done, deadline)) {
      BRAID_THROW(TimeoutError, "TCPStore client: {}:{} did not finish the authentication before the timeout", host,
                  port);
    }
    if (!result.ok()) {
      BRAID_THROW(CommError, "TCPStore client: authentication with {}:{} failed: {} (this process's secret: {}, from "
                  "{})", host, port, result.describe(), secret.fingerprint(), secret.source());
    }
  }

  // Runs the loop until `done` or the deadline; on the deadline closes the socket (cancelling the operation)
  // and returns false.
  bool run_until(bool& done, Deadline deadline) {
    io_.restart();
    while (!done) {
      if (deadline.is_never()) {
        io_.run_one();
      } else if (io_.run_one_for(deadline.remaining()) == 0 && deadline.expired()) {
        break;
      }
    }
    if (done) return true;
    reset_socket();
    io_.restart();
    io_.run();  // let the cancelled handler run so nothing refers to this frame's locals afterwards
    return false;
  }
  void reset_socket() {
    boost::system::error_code ec;
    socket_.close(ec);
  }
  [[noreturn]] void throw_comm(const char* what, const boost::system::error_code& ec) {
    BRAID_THROW(CommError, "TCPStore client: {} failed: {} (did the store server exit?)", what, ec.message());
  }

  asio::io_context io_;
  tcp::socket socket_;
};

TCPStore::TCPStore(std::string host, uint16_t port, TcpStoreOptions options)
    : Store(options.timeout),
      host_(std::move(host)),
      port_(port),
      secret_(options.secret ? *options.secret : security::job_secret()) {
  if (options.is_master) {
    server_ = std::make_unique<TcpStoreServer>(host_, port_, secret_);
    port_ = server_->port();
  }
  const int64_t joined = add(kWorkersKey, 1);
  if (options.is_master && options.wait_for_workers && options.world_size > 0) {
    const Deadline deadline = Deadline::after(options.timeout);
    int64_t seen = joined;
    while (seen < options.world_size) {
      if (deadline.expired()) {
        BRAID_THROW(TimeoutError, "TCPStore {}:{}: timed out after {} ms waiting for {} workers to connect ({} did)",
                    host_, port_, options.timeout.count(), options.world_size, seen);
      }
      std::this_thread::sleep_for(Millis(5));
      seen = parse_counter(kWorkersKey, get(kWorkersKey));
    }
  }
}

TCPStore::~TCPStore() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.clear();
  }
  server_.reset();
}

std::unique_ptr<TCPStore::Connection> TCPStore::acquire(Millis timeout) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return std::make_unique<Connection>(host_, port_, secret_, Deadline::after(timeout));
}

void TCPStore::release(std::unique_ptr<Connection> conn) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
}

Bytes TCPStore::call(const Bytes& request, Millis timeout, const char* what) {
  const Deadline deadline = Deadline::after(timeout);
  auto conn = acquire(timeout);
  auto response = conn->request(request, deadline);
  if (!response) {
    logging::dump_backtrace();
    BRAID_THROW(TimeoutError, "TCPStore {}:{}: {} timed out after {} ms", host_, port_, what, timeout.count());
  }
  release(std::move(conn));
  wire::Reader r(*response);
  const auto status = r.u8();
  if (status.value_or(1) != 0) {
    const auto msg = r.str();
    BRAID_THROW(InvalidArgument, "TCPStore {}: {}", what, msg.value_or("malformed error response"));
  }
  return Bytes(response->begin() + 1, response->end());
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::Set));
  w.str(key);
  w.bytes(value);
  call(w.buffer(), timeout(), "set");
}

Bytes TCPStore::get(const std::string& key, Millis timeout) {
  wait({key}, timeout);
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::Get));
  w.str(key);
  const Bytes body = call(w.buffer(), timeout, "get");
  wire::Reader r(body);
  const auto found = r.u8();
  auto value = r.bytes();
  BRAID_CHECK_TYPED(CommError, found && value, "TCPStore get: malformed response for key '{}'", key);
  BRAID_CHECK_ARG(*found == 1, "TCPStore get: key '{}' was deleted while being read", key);
  return std::move(*value);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::Add));
  w.str(key);
  w.i64(delta);
  const Bytes body = call(w.buffer(), timeout(), "add");
  wire::Reader r(body);
  auto v = r.i64();
  BRAID_CHECK_TYPED(CommError, v.has_value(), "TCPStore add: malformed response for key '{}'", key);
  return *v;
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::CompareSet));
  w.str(key);
  w.bytes(expected);
  w.bytes(desired);
  const Bytes body = call(w.buffer(), timeout(), "compare_set");
  wire::Reader r(body);
  auto v = r.bytes();
  BRAID_CHECK_TYPED(CommError, v.has_value(), "TCPStore compare_set: malformed response for key '{}'", key);
  return std::move(*v);
}

void TCPStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::Wait));
  w.strs(keys);
  const Deadline deadline = Deadline::after(timeout);
  auto conn = acquire(timeout);
  auto response = conn->request(w.buffer(), deadline);
  if (!response) {
    // The connection is dropped (the server forgets the wait when it sees the hang-up); name what is missing
    // using a fresh, short-lived check per key.
    std::vector<std::string> missing;
    try {
      for (const auto& k : keys) {
        if (!check({k})) missing.push_back(k);
      }
    } catch (const Error&) {
      missing = keys;
    }
    throw_wait_timeout(fmt::format("TCPStore {}:{}", host_, port_), keys, missing, timeout);
  }
  release(std::move(conn));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::Check));
  w.strs(keys);
  const Bytes body = call(w.buffer(), timeout(), "check");
  return !body.empty() && body[0] == 1;
}

bool TCPStore::delete_key(const std::string& key) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::Delete));
  w.str(key);
  const Bytes body = call(w.buffer(), timeout(), "delete_key");
  return !body.empty() && body[0] == 1;
}

int64_t TCPStore::num_keys() {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::NumKeys));
  const Bytes body = call(w.buffer(), timeout(), "num_keys");
  wire::Reader r(body);
  auto v = r.i64();
  BRAID_CHECK_TYPED(CommError, v.has_value(), "TCPStore num_keys: malformed response");
  return *v - 1;  // the workers counter is internal
}

std::vector<Bytes> TCPStore::multi_get(const std::vector<std::string>& keys, Millis timeout) {
  wait(keys, timeout);
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::MultiGet));
  w.strs(keys);
  const Bytes body = call(w.buffer(), timeout, "multi_get");
  wire::Reader r(body);
  auto n = r.u32();
  BRAID_CHECK_TYPED(CommError, n && *n == keys.size(), "TCPStore multi_get: malformed response");
  std::vector<Bytes> out;
  for (uint32_t i = 0; i < *n; ++i) {
    auto v = r.bytes();
    BRAID_CHECK_TYPED(CommError, v.has_value(), "TCPStore multi_get: malformed response");
    out.push_back(std::move(*v));
  }
  return out;
}

void TCPStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  BRAID_CHECK_EQ(keys.size(), values.size(), "multi_set: keys and values differ in length");
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Command::MultiSet));
  w.u32(static_cast<uint32_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    w.str(keys[i]);
    w.bytes(values[i]);
  }
  call(w.buffer(), timeout(), "multi_set");
}

}  // namespace braid::store
