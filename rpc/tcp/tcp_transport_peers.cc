// TcpTransport: which connection serves which peer. The handshake verdicts (one connection per pair,
// racing connects resolved by worker id), connect retries with backoff, and failure reports.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "base/logging.h"
#include "rpc/tcp/tcp_transport_impl.h"

namespace braid::rpc::tcp_detail {

std::string TcpTransport::describe_peer(const Peer& peer) const {
  if (peer.name.empty()) return fmt::format("worker {} ({})", peer.id, peer.address);
  return fmt::format("worker {} '{}' ({})", peer.id, peer.name, peer.address);
}

void TcpTransport::connect_locked(Peer& peer) {
  auto conn = std::make_shared<TcpConnection>(context(), asio::make_strand(io_), peer.id, peer.name, peer.endpoint);
  if (!register_connection(conn)) return;  // shutting down
  peer.outgoing = conn;
  conn->start_outgoing(self_id_);
}

HelloVerdict TcpTransport::on_hello(const std::shared_ptr<TcpConnection>& conn, uint64_t worker) {
  if (worker > static_cast<uint64_t>(INT_MAX) || worker == static_cast<uint64_t>(self_id_)) {
    return {HelloVerdict::kRefused, FailKind::kMalformed,
            fmt::format("hello from {} names worker {}, which is {}", conn->describe(), worker,
                        worker > static_cast<uint64_t>(INT_MAX) ? "not a valid worker id" : "this worker's own id")};
  }
  Peer* peer = find_peer(static_cast<int>(worker));
  if (peer == nullptr) {
    return {HelloVerdict::kRefused, FailKind::kUnknownPeer,
            fmt::format("hello from {} names worker {}, which is not a known peer of worker {} (if it was not added "
                        "yet, the other side retries)", conn->describe(), worker, self_id_)};
  }
  std::shared_ptr<TcpConnection> superseded;
  std::shared_ptr<TcpConnection> replaced;
  std::string replaced_reason;
  {
    std::lock_guard lock(peer->mu);
    if (stopping_.load(std::memory_order_acquire)) {
      conn->close();
      return {HelloVerdict::kDeclined, FailKind::kClosed, {}};
    }
    // Racing connects: the connection initiated by the lower worker id survives. Ours (outgoing) wins
    // when our id is lower; the peer, seeing our hello, adopts ours and abandons its own.
    const auto& competing = peer->active ? peer->active : peer->outgoing;
    if (competing && competing->role() == TcpConnection::Role::kOutgoing && self_id_ < static_cast<int>(worker)) {
      logging::get("braid.rpc")->debug("tcp transport (worker {}): declining the connection from {}: ours, "
                                       "initiated by the lower id, is kept", self_id_, describe_peer(*peer));
      conn->close();
      return {HelloVerdict::kDeclined, FailKind::kClosed, {}};
    }
    // Otherwise the new connection wins: it supersedes our own attempt, and it replaces an open connection
    // that the peer (which only connects when it has none) must have seen break.
    superseded = std::move(peer->outgoing);
    peer->outgoing.reset();
    replaced = std::move(peer->active);
    peer->active.reset();
    if (replaced) {
      replaced_reason = fmt::format("connection to {} replaced by a new connection from it; messages in flight on "
                                    "the old one may be lost", describe_peer(*peer));
    }
    peer->connecting = false;
    peer->attempts = 0;
    ++peer->retry_generation;
    peer->retry_timer.cancel();
    peer->active = conn;
    conn->open_from_strand(self_id_, peer->id, peer->name);
    conn->send_all(peer->pending);  // after the answering hello, in send order
  }
  if (superseded) superseded->close();
  if (replaced) {
    replaced->close();
    logging::get("braid.rpc")->warn("tcp transport (worker {}): {}", self_id_, replaced_reason);
    report_failure(static_cast<int>(worker), replaced_reason);
  }
  return {HelloVerdict::kAccepted, FailKind::kClosed, {}};
}

void TcpTransport::on_accepted(const std::shared_ptr<TcpConnection>& conn) {
  Peer* peer = find_peer(conn->peer());
  bool abandoned = peer == nullptr;
  if (peer != nullptr) {
    std::lock_guard lock(peer->mu);
    if (stopping_.load(std::memory_order_acquire) || peer->outgoing != conn) {
      abandoned = true;  // an incoming connection from the peer won meanwhile
    } else {
      peer->outgoing.reset();
      peer->connecting = false;
      peer->attempts = 0;
      ++peer->retry_generation;
      peer->active = conn;
      conn->send_all(peer->pending);
    }
  }
  if (abandoned) conn->close();
}

void TcpTransport::on_message(const TcpConnection& conn, Message msg) {
  if (stopping_.load(std::memory_order_acquire)) return;
  const int peer = conn.peer();
  try {
    handlers_.on_message(peer, std::move(msg));
  } catch (const std::exception& e) {
    // The message was well-formed; a throwing handler is the agent's bug, not the connection's.
    logging::get("braid.rpc")->error("tcp transport (worker {}): the message handler threw on a message from "
                                     "worker {}: {}", self_id_, peer, e.what());
  }
}

void TcpTransport::on_failed(const std::shared_ptr<TcpConnection>& conn, FailKind kind, const std::string& reason) {
  const int id = conn->peer();
  Peer* peer = id >= 0 ? find_peer(id) : nullptr;
  std::optional<std::string> report;
  std::deque<OutFrame> dropped;  // destroyed after the lock is released
  bool was_active = false;
  bool retrying = false;
  int attempt = 0;
  if (peer != nullptr) {
    std::lock_guard lock(peer->mu);
    const bool stopping = stopping_.load(std::memory_order_acquire);
    if (peer->active == conn) {
      was_active = true;
      peer->active.reset();
      if (!stopping) report = reason;
    } else if (peer->outgoing == conn) {
      peer->outgoing.reset();
      if (!stopping) {
        attempt = peer->attempts + 1;
        // A peer that does not share our secret will not start to: give up at once.
        report = kind == FailKind::kUnauthenticated ? give_up_locked(*peer, reason, dropped)
                                                    : retry_or_give_up_locked(*peer, reason, dropped);
        retrying = !report;
      }
    }
  }
  auto log = logging::get("braid.rpc");
  if (kind == FailKind::kUnauthenticated) {
    log->warn("tcp transport (worker {}): {}", self_id_, reason);
  } else if (kind == FailKind::kMalformed) {
    log->error("tcp transport (worker {}): closing the connection: {}", self_id_, reason);
  } else if (kind == FailKind::kUnknownPeer) {
    log->warn("tcp transport (worker {}): closing the connection: {}", self_id_, reason);
  } else if (was_active && report) {
    // A peer that shuts down closes its connections too: the agent, told through on_peer_failure,
    // knows whether calls were pending and logs an error only then.
    log->info("tcp transport (worker {}): {}", self_id_, reason);
  } else if (retrying) {
    log->debug("tcp transport (worker {}): {} (attempt {} of {}, retrying)", self_id_, reason, attempt,
               options_.connect_retries);
  } else {
    log->debug("tcp transport (worker {}): {}", self_id_, reason);
  }
  if (report && !was_active) log->warn("tcp transport (worker {}): {}", self_id_, *report);
  if (report) report_failure(id, *report);
}

std::string TcpTransport::give_up_locked(Peer& peer, const std::string& why, std::deque<OutFrame>& dropped) {
  const size_t lost = peer.pending.size();
  dropped.swap(peer.pending);
  peer.connecting = false;
  peer.attempts = 0;
  return fmt::format("{} ({} queued message(s) dropped, not retried)", why, lost);
}

std::optional<std::string> TcpTransport::retry_or_give_up_locked(Peer& peer, const std::string& why,
                                                                  std::deque<OutFrame>& dropped) {
  ++peer.attempts;
  if (peer.attempts >= options_.connect_retries) {
    const size_t lost = peer.pending.size();
    dropped.swap(peer.pending);
    peer.connecting = false;
    peer.attempts = 0;
    return fmt::format("cannot reach {} after {} connection attempts ({} queued message(s) dropped); last error: {}",
                       describe_peer(peer), options_.connect_retries, lost, why);
  }
  auto delay = options_.connect_backoff;
  for (int i = 1; i < peer.attempts && delay < options_.connect_backoff_max; ++i) delay *= 2;
  delay = std::min(delay, options_.connect_backoff_max);
  const uint64_t generation = ++peer.retry_generation;
  peer.retry_timer.expires_after(delay);
  peer.retry_timer.async_wait([this, &peer, generation](const boost::system::error_code& ec) {
    if (!ec) on_retry_timer(peer, generation);
  });
  return std::nullopt;
}

void TcpTransport::on_retry_timer(Peer& peer, uint64_t generation) {
  std::lock_guard lock(peer.mu);
  if (stopping_.load(std::memory_order_acquire) || generation != peer.retry_generation || !peer.connecting ||
      peer.active || peer.outgoing) {
    return;
  }
  connect_locked(peer);
}

void TcpTransport::report_failure(int peer, const std::string& reason) {
  if (stopping_.load(std::memory_order_acquire) || !handlers_.on_peer_failure) return;
  try {
    handlers_.on_peer_failure(peer, reason);
  } catch (const std::exception& e) {
    logging::get("braid.rpc")->error("tcp transport (worker {}): the peer-failure handler threw for worker {}: {}",
                                     self_id_, peer, e.what());
  }
}

}  // namespace braid::rpc::tcp_detail
