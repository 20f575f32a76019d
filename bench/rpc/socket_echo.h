// The plain-socket reference of `braid bench rpc`: the same echo as the RPC rows (worker0 sends a buffer,
// worker1 sends it back, GB/s = bytes / mean round trip, counted one way), over one blocking loopback TCP
// connection with nothing of braid's on it but the job's handshake. It is what the kernel's TCP does on
// this machine, under the same load, in the same run: the bound for the tcp transport's echo rows, which
// the table prints as a ratio (the tcp transport's goal is >= 0.8x of it).
//
// The server (worker1) listens on 127.0.0.1, any port, before RPC starts and publishes the port in the
// job's store; it serves one connection at a time on a thread of its own, which the destructor stops and
// joins. Every connection opens with the job-secret handshake (security/handshake.h, service kRpcTcp: it
// stands in for RPC over TCP), so the port answers no stranger. The protocol: the client sends an 8-byte
// length and that many bytes; the server reads all of them and writes them back (store and forward, as
// an RPC echo does); a length of 0 ends the connection. Default socket options but TCP_NODELAY (as the
// tcp transport's), no SO_SNDBUF: that is the "plain" in plain sockets.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "bench/rpc/rpc_bench.h"

namespace braid::bench {

class SocketEchoServer {
 public:
  SocketEchoServer();  // listens on 127.0.0.1, any port; CommError naming the call that failed
  ~SocketEchoServer();
  SocketEchoServer(const SocketEchoServer&) = delete;
  SocketEchoServer& operator=(const SocketEchoServer&) = delete;

  int port() const { return port_; }

 private:
  void serve();
  void serve_connection(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> conn_fd_{-1};  // the connection being served, shut down by the destructor
  std::thread thread_;
};

// The client: `warmup` untimed echoes of `bytes`, then `iters` timed ones, over one connection to
// 127.0.0.1:`port`. The row is op "socket_echo" with latencies and payload_gbs as the RPC echo rows; an
// echo that comes back different fails it. CommError names the step and the sizes.
RpcBenchRow socket_echo_row(int port, int64_t bytes, int warmup, int iters);

}  // namespace braid::bench
