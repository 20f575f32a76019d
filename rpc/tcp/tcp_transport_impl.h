// Private to rpc/tcp (and its tests): the TCP transport's class. The design is described in
// rpc/tcp/tcp_transport.h.
//
// Locks, in the order they may be taken: a Peer's mu, then a connection's mu (TcpConnection), then
// conns_mu_ or the prefix pool's. peers_mu_ guards only the map (peers are never removed) and is not held
// while a peer's mu is taken. No lock is held while a handler runs.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rpc/tcp/tcp_connection.h"
#include "rpc/transport.h"

namespace braid::rpc::tcp_detail {

class TcpTransport final : public Transport, private ConnectionOwner {
 public:
  explicit TcpTransport(const TransportOptions& options);
  ~TcpTransport() override;

  std::string name() const override { return "tcp"; }
  std::vector<uint8_t> local_address() const override;
  std::string describe_address(const std::vector<uint8_t>& address) const override;
  void start(int self_id, TransportHandlers handlers) override;
  void add_peers(const std::vector<PeerInfo>& peers) override;
  void send(int peer, Message msg) override;
  void shutdown() override;

  // Connections open or being set up (tests check that racing connects leave exactly one).
  size_t connection_count() const;

 private:
  struct Peer {
    explicit Peer(asio::io_context& io) : retry_timer(io) {}
    int id = -1;
    std::mutex mu;
    std::string name;
    std::string address;  // as published, for messages
    tcp::endpoint endpoint;
    std::shared_ptr<TcpConnection> active;    // open: carries every send
    std::shared_ptr<TcpConnection> outgoing;  // our attempt, not yet answered by the peer
    bool connecting = false;                  // an attempt, or the pause before the next one, is under way
    int attempts = 0;                         // failed attempts of the current round
    uint64_t retry_generation = 0;            // invalidates a pending retry timer
    asio::steady_timer retry_timer;
    std::deque<OutFrame> pending;             // sends waiting for a connection
  };

  // ConnectionOwner (tcp_transport_peers.cc); each runs on the connection's strand.
  HelloVerdict on_hello(const std::shared_ptr<TcpConnection>& conn, uint64_t worker) override;
  void on_accepted(const std::shared_ptr<TcpConnection>& conn) override;
  void on_message(const TcpConnection& conn, Message msg) override;
  void on_failed(const std::shared_ptr<TcpConnection>& conn, FailKind kind, const std::string& reason) override;
  void on_closed(const TcpConnection& conn) override;

  // tcp_transport_peers.cc
  void connect_locked(Peer& peer);
  // An attempt failed: schedules the next one, or gives up (returns the failure to report, if any).
  std::optional<std::string> retry_or_give_up_locked(Peer& peer, const std::string& why, std::deque<OutFrame>& dropped);
  // Gives up on the peer now (its queued messages are dropped) and returns the failure to report.
  std::string give_up_locked(Peer& peer, const std::string& why, std::deque<OutFrame>& dropped);
  void on_retry_timer(Peer& peer, uint64_t generation);
  void report_failure(int peer, const std::string& reason);
  std::string describe_peer(const Peer& peer) const;

  // tcp_transport.cc
  Peer* find_peer(int id) const;
  void accept_from_loop();
  void send_to_self(Message msg);
  bool register_connection(const std::shared_ptr<TcpConnection>& conn);
  bool on_io_thread() const;
  ConnectionContext context() {
    return ConnectionContext{*this, pool_, options_.limits, options_.socket_send_buffer, options_.handshake_timeout,
                             secret_};
  }

  const TransportOptions options_;
  const security::JobSecret secret_;  // options_.secret, else the process's
  // Declared first so that it is destroyed last: sockets and timers below belong to it.
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  Strand accept_strand_;
  asio::basic_socket_acceptor<tcp, Strand> acceptor_;
  asio::basic_waitable_timer<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, Strand>
      accept_retry_timer_;
  Strand self_strand_;
  std::string address_;  // "host:port" that peers connect to

  int self_id_ = -1;
  TransportHandlers handlers_;
  std::vector<std::thread> threads_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::mutex life_mu_;  // start() and shutdown()
  bool shut_down_ = false;

  mutable std::shared_mutex peers_mu_;
  std::map<int, std::unique_ptr<Peer>> peers_;

  mutable std::mutex conns_mu_;
  std::unordered_map<const TcpConnection*, std::shared_ptr<TcpConnection>> conns_;

  PrefixPool pool_;
};

}  // namespace braid::rpc::tcp_detail
