// TCPStore: a Store served by one process (the master, usually rank 0) over TCP (Boost.Asio), reachable by
// any number of clients. Every TCPStore object is a client; the master's object also owns the server.
//
// Each call borrows a connection from a small pool, so calls from several threads run concurrently (a
// thread blocked in get() does not hold up another's set()). A connection that saw a timeout or an error
// is discarded, never reused. Clients retry connecting, with back-off, until the store timeout: workers
// may start before the master. Every connection first proves both ends hold the job secret
// (security/handshake.h); a server that refuses ours fails the call with a CommError at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "security/job_secret.h"
#include "store/store.h"

namespace braid::store {

class TcpStoreServer;

struct TcpStoreOptions {
  // This process hosts the server (binds host:port; port 0 picks a free one, see port()).
  bool is_master = false;
  // With is_master and wait_for_workers, the constructor returns once world_size clients (this one
  // included) have connected, or throws TimeoutError naming how many came.
  int world_size = -1;
  bool wait_for_workers = true;
  // Default timeout of blocking calls and of connecting.
  Millis timeout = kDefaultStoreTimeout;
  // The secret the server demands and the client proves (docs/SECURITY.md); unset: the process's
  // (security::job_secret()). A client with another secret is refused with a CommError.
  std::optional<security::JobSecret> secret;
};

class TCPStore final : public Store {
 public:
  TCPStore(std::string host, uint16_t port, TcpStoreOptions options = {});
  ~TCPStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys, Millis timeout) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  using Store::get;
  using Store::multi_get;
  using Store::set;
  using Store::wait;

  const std::string& host() const { return host_; }
  std::string server_host() const override { return host_ == "0.0.0.0" ? std::string() : host_; }
  // The server's port (the bound one when the master asked for port 0).
  uint16_t port() const { return port_; }
  // Whether this object serves the store (is_master): the process must outlive the others' use of it.
  bool hosts_server() const { return server_ != nullptr; }

 private:
  class Connection;
  // Sends one request and returns the response body (status byte stripped); throws on an error status.
  Bytes call(const Bytes& request, Millis timeout, const char* what);
  std::unique_ptr<Connection> acquire(Millis timeout);
  void release(std::unique_ptr<Connection> conn);

  std::string host_;
  uint16_t port_;
  const security::JobSecret secret_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // GUARDED_BY(pool_mu_)
};

}  // namespace braid::store
