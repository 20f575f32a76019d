// TcpConnection: life cycle, handshake and the frame reader (writing is in tcp_connection_write.cc).
#include "rpc/tcp/tcp_connection.h"

#include <fmt/format.h>

#include <cstring>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/tcp/tcp_address.h"
#include "security/asio_handshake.h"

namespace braid::rpc::tcp_detail {

namespace {

// Big enough that one recv takes many small frames (64 calls in flight) at once, small enough that the
// part of a large payload copied out of it stays negligible.
constexpr size_t kReadBufferBytes = 64 * 1024;
// Compact the buffer before a read that would have less room than this.
constexpr size_t kMinReadRoom = 4 * 1024;
// A hello carries its worker id in the request id; its meta is reserved (and bounded).
constexpr uint32_t kMaxHelloMetaBytes = 1024;

std::string remote_text(const Socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  return ec ? std::string("an unknown endpoint") : endpoint_text(ep);
}

}  // namespace

TcpConnection::TcpConnection(ConnectionContext ctx, Socket socket)
    : ctx_(ctx),
      role_(Role::kIncoming),
      strand_(socket.get_executor()),
      socket_(std::move(socket)),
      deadline_(strand_),
      remote_(remote_text(socket_)),
      peer_(-1),
      phase_(Phase::kAuthenticating),
      rbuf_(kReadBufferBytes) {}

TcpConnection::TcpConnection(ConnectionContext ctx, Strand strand, int peer, std::string peer_name,
                             tcp::endpoint endpoint)
    : ctx_(ctx),
      role_(Role::kOutgoing),
      strand_(std::move(strand)),
      socket_(strand_),
      deadline_(strand_),
      remote_(endpoint_text(endpoint)),
      endpoint_(endpoint),
      peer_(peer),
      peer_name_(std::move(peer_name)),
      phase_(Phase::kConnecting),
      rbuf_(kReadBufferBytes) {}

TcpConnection::~TcpConnection() = default;

std::string TcpConnection::describe() const {
  const int p = peer();
  if (p < 0) return remote_;
  if (peer_name_.empty()) return fmt::format("worker {} ({})", p, remote_);
  return fmt::format("worker {} '{}' ({})", p, peer_name_, remote_);
}

void TcpConnection::start_incoming() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopped_) return;
    self->arm_deadline_from_strand();
    self->authenticate_from_strand(Phase::kAwaitHello);
  });
}

void TcpConnection::start_outgoing(int self_id) {
  OutFrame hello = make_hello(self_id);
  send(hello);  // waits in the queue until the socket is connected
  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopped_) return;
    self->arm_deadline_from_strand();
    self->socket_.async_connect(self->endpoint_, [self](const boost::system::error_code& ec) {
      if (self->stopped_) return;
      if (ec) {
        self->fail_from_strand(FailKind::kClosed, fmt::format("cannot connect to {}: {}", self->describe(), ec.message()));
        return;
      }
      self->authenticate_from_strand(Phase::kAwaitAccept);
    });
  });
}

void TcpConnection::authenticate_from_strand(Phase next) {
  phase_ = Phase::kAuthenticating;
  auto done = [self = shared_from_this(), next](const security::HandshakeResult& r) {
    if (self->stopped_) return;
    if (!r.ok()) {
      const std::string why = "authentication failed: " + r.describe();
      self->fail_from_strand(FailKind::kUnauthenticated,
                             self->role_ == Role::kOutgoing
                                 ? fmt::format("cannot connect to {}: {}", self->describe(), why)
                                 : fmt::format("refused a connection from {}: {}", self->describe(), why));
      return;
    }
    // The queued hello (outgoing) may leave only now: socket_ready_from_strand hands the socket to send().
    self->phase_ = next;
    self->socket_ready_from_strand();
    self->read_more_from_strand();
  };
  if (role_ == Role::kOutgoing) {
    security::async_client_handshake(socket_, ctx_.secret, security::Service::kRpcTcp, std::move(done));
  } else {
    security::async_server_handshake(socket_, ctx_.secret, security::Service::kRpcTcp, std::move(done));
  }
}

void TcpConnection::open_from_strand(int self_id, int peer, std::string peer_name) {
  peer_name_ = std::move(peer_name);
  peer_.store(peer, std::memory_order_release);
  phase_ = Phase::kOpen;
  deadline_.cancel();
  OutFrame hello = make_hello(self_id);
  send(hello);
}

void TcpConnection::arm_deadline_from_strand() {
  deadline_.expires_after(ctx_.handshake_timeout);
  deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->stopped_ || self->phase_ == Phase::kOpen) return;
    const auto ms = self->ctx_.handshake_timeout.count();
    std::string reason;
    switch (self->phase_) {
      case Phase::kConnecting:
        reason = fmt::format("cannot connect to {}: timed out after {} ms", self->describe(), ms);
        break;
      case Phase::kAuthenticating:
        reason = self->role_ == Role::kOutgoing
                     ? fmt::format("cannot connect to {}: the authentication did not finish within {} ms",
                                   self->describe(), ms)
                     : fmt::format("refused a connection from {}: no authentication within {} ms", self->describe(), ms);
        break;
      case Phase::kAwaitAccept:
        reason = fmt::format("cannot connect to {}: no answer to the hello within {} ms", self->describe(), ms);
        break;
      default:
        reason = fmt::format("connection from {} closed: no hello within {} ms", self->describe(), ms);
        break;
    }
    self->fail_from_strand(FailKind::kClosed, reason);
  });
}

void TcpConnection::socket_ready_from_strand() {
  boost::system::error_code ec;
  // Small frames are latency-bound: never let Nagle hold one back waiting for an ACK.
  socket_.set_option(tcp::no_delay(true), ec);
  if (ctx_.socket_send_buffer > 0) {
    socket_.set_option(asio::socket_base::send_buffer_size(ctx_.socket_send_buffer), ec);
    if (ec) {
      logging::get("braid.rpc")->debug("tcp: SO_SNDBUF {} on {}: {}", ctx_.socket_send_buffer, describe(), ec.message());
    }
  }
  std::lock_guard lock(mu_);
  if (closed_.load(std::memory_order_relaxed)) return;
  fd_ = socket_.native_handle();
  if (!writing_ && !queue_.empty()) flush_locked();
}

void TcpConnection::close() {
  {
    std::lock_guard lock(mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    closed_.store(true, std::memory_order_release);
  }
  asio::post(strand_, [self = shared_from_this()] { self->close_socket_from_strand(); });
}

void TcpConnection::fail_from_strand(FailKind kind, const std::string& reason) {
  if (stopped_) return;
  stopped_ = true;
  // The owner detaches the connection from its peer before it is marked closed, so that a send() that
  // still finds it attached can always queue on it (and the loss is covered by this failure).
  if (!closed()) ctx_.owner.on_failed(shared_from_this(), kind, reason);
  close_socket_from_strand();
}

void TcpConnection::close_socket_from_strand() {
  stopped_ = true;
  if (socket_closed_) return;
  socket_closed_ = true;
  std::deque<OutFrame> dropped;
  {
    std::lock_guard lock(mu_);
    closed_.store(true, std::memory_order_release);
    fd_ = -1;
    dropped.swap(queue_);
  }
  boost::system::error_code ec;
  deadline_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  ctx_.owner.on_closed(*this);
}

void TcpConnection::on_io_error_from_strand(const boost::system::error_code& ec, const char* what) {
  if (stopped_) return;
  const bool handshake = phase_ != Phase::kOpen;
  std::string reason;
  if (handshake && role_ == Role::kOutgoing) {
    reason = fmt::format("cannot connect to {}: connection {} during the handshake: {}", describe(), what, ec.message());
  } else if (handshake) {
    reason = fmt::format("connection from {} {} before its hello: {}", describe(), what, ec.message());
  } else {
    reason = fmt::format("connection to {} {}: {}", describe(), what, ec.message());
  }
  fail_from_strand(FailKind::kClosed, reason);
}

// --- Reading

void TcpConnection::read_more_from_strand() {
  if (rpos_ == rend_) {
    rpos_ = rend_ = 0;
    // A huge table or meta grew the buffer; give the memory back once it is drained.
    if (rbuf_.size() > 4 * kReadBufferBytes) {
      rbuf_.resize(kReadBufferBytes);
      rbuf_.shrink_to_fit();
    }
  } else if (rbuf_.size() - rend_ < kMinReadRoom) {
    std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
    rend_ -= rpos_;
    rpos_ = 0;
  }
  socket_.async_read_some(asio::buffer(rbuf_.data() + rend_, rbuf_.size() - rend_),
                          [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                            self->on_read_from_strand(ec, n);
                          });
}

void TcpConnection::on_read_from_strand(const boost::system::error_code& ec, size_t n) {
  if (stopped_) return;
  if (ec) {
    on_io_error_from_strand(ec, "closed");
    return;
  }
  rend_ += n;
  parse_from_strand();
}

void TcpConnection::ensure_room_from_strand(size_t bytes) {
  if (rbuf_.size() - rpos_ >= bytes) return;
  std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
  rend_ -= rpos_;
  rpos_ = 0;
  if (rbuf_.size() < bytes) rbuf_.resize(bytes);
}

// Parses every complete frame in the buffer. A frame whose payload has not fully arrived continues with
// one read straight into its tensors (on_payload_from_strand), then parsing resumes.
void TcpConnection::parse_from_strand() {
  WriteBatch batch;  // replies sent inline by the handlers go out together
  try {
    while (!stopped_ && !closed()) {
      size_t avail = rend_ - rpos_;
      if (!header_) {
        if (avail < kFrameHeaderBytes) break;
        const FrameHeader h = decode_header({rbuf_.data() + rpos_, kFrameHeaderBytes}, ctx_.limits);
        check_phase_from_strand(h);
        header_ = h;
        rpos_ += kFrameHeaderBytes;
        avail -= kFrameHeaderBytes;
      }
      const size_t body = header_->body_bytes();
      if (avail < body) {
        ensure_room_from_strand(body);
        break;
      }
      Message msg = decode_body(*header_, {rbuf_.data() + rpos_, body});
      rpos_ += body;
      header_.reset();
      payload_bufs_.clear();
      for (const auto span : receive_spans(msg)) {
        const size_t buffered = std::min(span.size(), rend_ - rpos_);
        std::memcpy(span.data(), rbuf_.data() + rpos_, buffered);
        rpos_ += buffered;
        if (buffered < span.size()) payload_bufs_.emplace_back(span.data() + buffered, span.size() - buffered);
      }
      if (!payload_bufs_.empty()) {
        incoming_ = std::move(msg);
        asio::async_read(socket_, BufferView<asio::mutable_buffer>(payload_bufs_), TransferAll{},
                         [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                           self->on_payload_from_strand(ec);
                         });
        return;
      }
      handle_frame_from_strand(std::move(msg));
    }
  } catch (const std::exception& e) {
    fail_from_strand(FailKind::kMalformed, fmt::format("malformed input from {}: {}", describe(), e.what()));
    return;
  }
  if (!stopped_ && !closed()) read_more_from_strand();
}

void TcpConnection::on_payload_from_strand(const boost::system::error_code& ec) {
  if (stopped_) return;
  if (ec) {
    on_io_error_from_strand(ec, "closed in the middle of a tensor payload");
    return;
  }
  WriteBatch batch;
  try {
    handle_frame_from_strand(std::move(incoming_));
  } catch (const std::exception& e) {
    fail_from_strand(FailKind::kMalformed, fmt::format("malformed input from {}: {}", describe(), e.what()));
    return;
  }
  incoming_ = Message{};
  parse_from_strand();
}

// Rejects a frame the handshake does not allow before its table, meta or payload is read, so that a
// stranger cannot make the transport allocate anything.
void TcpConnection::check_phase_from_strand(const FrameHeader& h) const {
  if (phase_ == Phase::kOpen) {
    if (h.type == MessageType::kHello) {
      BRAID_THROW(WireError, "a second hello (#{}) on an open connection", h.id);
    }
    return;
  }
  if (h.type != MessageType::kHello) {
    BRAID_THROW(WireError, "a {} frame (#{}) before the handshake finished: the first frame must be a hello",
                message_type_name(h.type), h.id);
  }
  if (h.table_bytes != 0 || h.payload_bytes != 0 || h.meta_bytes > kMaxHelloMetaBytes) {
    BRAID_THROW(WireError, "hello with a {}-byte tensor table, {} bytes of meta and {} payload bytes (a hello "
                "has no tensors and at most {} bytes of meta)", h.table_bytes, h.meta_bytes, h.payload_bytes,
                kMaxHelloMetaBytes);
  }
}

void TcpConnection::handle_frame_from_strand(Message msg) {
  switch (phase_) {
    case Phase::kOpen:
      ctx_.owner.on_message(*this, std::move(msg));
      return;
    case Phase::kAwaitHello: {
      const HelloVerdict verdict = ctx_.owner.on_hello(shared_from_this(), msg.id);
      if (verdict.kind == HelloVerdict::kRefused) fail_from_strand(verdict.fail, verdict.why);
      return;
    }
    case Phase::kAwaitAccept:
      if (msg.id != static_cast<uint64_t>(peer())) {
        BRAID_THROW(WireError, "the answer to our hello says it is worker {}, not worker {}", msg.id, peer());
      }
      phase_ = Phase::kOpen;
      deadline_.cancel();
      ctx_.owner.on_accepted(shared_from_this());
      return;
    case Phase::kConnecting:
      break;
  }
  BRAID_THROW(InternalError, "tcp connection to {}: a frame arrived before the socket connected", describe());
}

}  // namespace braid::rpc::tcp_detail
