#include "bench/rpc/socket_echo.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "security/handshake.h"
#include "security/job_secret.h"

namespace braid::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr security::Service kService = security::Service::kRpcTcp;

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

[[noreturn]] void fail(const char* what, int64_t bytes, int err) {
  BRAID_THROW(CommError, "bench rpc socket echo: {} ({} bytes) failed: {}", what, bytes, std::strerror(err));
}

// Reads or writes exactly `n` bytes; false when the peer closed before the first byte of a read.
bool read_all(int fd, void* buf, size_t n, const char* what) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::recv(fd, p + done, n - done, 0);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && done == 0) return false;
    if (r == 0) BRAID_THROW(CommError, "bench rpc socket echo: {}: the peer closed after {} of {} bytes", what, done, n);
    fail(what, static_cast<int64_t>(n), errno);
  }
  return true;
}

void write_all(int fd, const void* buf, size_t n, const char* what) {
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::send(fd, p + done, n - done, MSG_NOSIGNAL);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    fail(what, static_cast<int64_t>(n), errno);
  }
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

SocketEchoServer::SocketEchoServer() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) fail("socket()", 0, errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listen_fd_, 4) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    fail("listening on 127.0.0.1", 0, err);
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

SocketEchoServer::~SocketEchoServer() {
  stop_ = true;
  const int conn = conn_fd_.load();
  if (conn >= 0) ::shutdown(conn, SHUT_RDWR);  // wakes a blocked read; the thread closes it
  thread_.join();
  ::close(listen_fd_);
}

void SocketEchoServer::serve() {
  while (!stop_) {
    // Short polls, so that the destructor's stop is seen without a connection to wake the thread.
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    Fd conn(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.fd < 0) continue;
    conn_fd_ = conn.fd;
    try {
      serve_connection(conn.fd);
    } catch (const std::exception& e) {
      if (!stop_) logging::get("braid.bench")->warn("bench rpc socket echo server: {}", e.what());
    }
    conn_fd_ = -1;
  }
}

void SocketEchoServer::serve_connection(int fd) {
  set_nodelay(fd);
  security::ServerHandshake hs(security::job_secret(), kService);
  write_all(fd, hs.challenge().data(), hs.challenge().size(), "sending the challenge");
  security::Response response{};
  if (!read_all(fd, response.data(), response.size(), "reading the handshake response")) return;
  const auto proof = hs.verify(response);
  if (!proof) {
    logging::get("braid.bench")->warn("bench rpc socket echo server: refused a connection: authentication failed");
    return;
  }
  write_all(fd, proof->data(), proof->size(), "sending the proof");
  std::vector<uint8_t> buf;
  for (;;) {
    uint64_t n = 0;
    if (!read_all(fd, &n, sizeof(n), "reading a length") || n == 0) return;
    BRAID_CHECK_ARG(n <= (uint64_t{1} << 32), "bench rpc socket echo server: a length of {} bytes is over 4 GiB", n);
    buf.resize(n);
    if (!read_all(fd, buf.data(), n, "reading an echo")) return;
    write_all(fd, buf.data(), n, "writing an echo back");
  }
}

RpcBenchRow socket_echo_row(int port, int64_t bytes, int warmup, int iters) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.fd < 0) fail("socket()", bytes, errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fail("connect to 127.0.0.1", bytes, errno);
  set_nodelay(fd.fd);
  security::ClientHandshake hs(security::job_secret(), kService);
  security::Challenge challenge{};
  BRAID_CHECK_TYPED(CommError, read_all(fd.fd, challenge.data(), challenge.size(), "reading the challenge"),
                    "bench rpc socket echo: the server on port {} closed before its challenge", port);
  const auto response = hs.respond(challenge);
  BRAID_CHECK_TYPED(CommError, response.has_value(), "bench rpc socket echo: port {} sent no braid challenge", port);
  write_all(fd.fd, response->data(), response->size(), "sending the handshake response");
  security::Proof proof{};
  BRAID_CHECK_TYPED(CommError, read_all(fd.fd, proof.data(), proof.size(), "reading the proof") && hs.verify(proof),
                    "bench rpc socket echo: the server on port {} refused this job's secret", port);

  const auto n = static_cast<uint64_t>(bytes);
  std::vector<uint8_t> out(n), in(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 131 + 7);
  const auto echo = [&] {
    write_all(fd.fd, &n, sizeof(n), "sending a length");
    write_all(fd.fd, out.data(), n, "sending an echo");
    BRAID_CHECK_TYPED(CommError, read_all(fd.fd, in.data(), n, "reading an echo back"),
                      "bench rpc socket echo: the server closed instead of echoing {} bytes", n);
  };
  echo();
  BRAID_CHECK_TYPED(InternalError, in == out, "bench rpc socket echo: {} bytes came back different", n);
  for (int i = 0; i < warmup; ++i) echo();
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    echo();
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const uint64_t bye = 0;
  write_all(fd.fd, &bye, sizeof(bye), "ending the connection");

  RpcBenchRow row;
  row.op = "socket_echo";
  row.bytes = bytes;
  row.calls = iters;
  set_latencies(row, std::move(samples));
  row.payload_gbs = static_cast<double>(bytes) / (row.mean_us * 1e3);
  return row;
}

}  // namespace braid::bench
