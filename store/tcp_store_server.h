// The TCPStore server: one Boost.Asio event loop on its own thread holds the key-value map and answers
// every client connection. Waits are parked on the server until their keys appear, so any number of
// clients can wait concurrently without polling. A malformed frame closes that one connection with a
// logged error; the server and other clients go on.
//
// Every connection starts with the job-secret handshake (security/handshake.h): a client that fails it,
// or sends nothing within the handshake timeout, is logged with its address and closed, having read
// nothing of the store and sized nothing from its bytes.
//
// Thread model: all state lives on the loop thread (`*_from_loop` methods); the public methods only start
// and stop the loop. The destructor stops the loop and joins the thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "security/job_secret.h"

namespace braid::store {

class TcpStoreServer {
 public:
  // Binds host:port (port 0 picks a free port) and starts the loop thread. Throws CommError when the
  // address cannot be bound (naming it and the reason, e.g. "Address already in use").
  TcpStoreServer(const std::string& host, uint16_t port, security::JobSecret secret,
                 Millis handshake_timeout = Millis(10'000));
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::thread loop_thread_;
};

}  // namespace braid::store
