// Private to rpc/tcp: one TCP connection of the transport — its socket, the handshake, the frame reader
// and the write queue. The transport (ConnectionOwner) decides which connection serves which peer.
//
// Threads: everything that touches the socket runs on the connection's strand ("_from_strand"), except
// the fast path of send(), which may write with a non-blocking sendmsg() from the caller's thread while
// nothing else is being written; mu_ makes that exclusive with the strand's writes and with close().
//
// Phases: both ends first run the job-secret handshake (kAuthenticating; security/asio_handshake.h), and
// nothing of the peer's is read as a frame before it succeeds. Then an outgoing connection sends its hello and waits for the peer's hello (kAwaitAccept);
// an incoming one waits for the initiator's hello (kAwaitHello) and is opened by the owner's verdict. Only
// an open connection delivers messages. A deadline closes a connection whose handshake does not finish.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rpc/tcp/tcp_frames.h"
#include "rpc/wire.h"
#include "security/job_secret.h"

namespace braid::rpc::tcp_detail {

using asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;
// The socket and timer run their completion handlers on the connection's strand by default.
using Socket = asio::basic_stream_socket<tcp, Strand>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, Strand>;

class TcpConnection;

// Why a connection ended, which decides how loudly the owner logs it.
enum class FailKind {
  kClosed,      // the peer closed it, an I/O error, a failed connect, a handshake timeout
  kMalformed,   // the peer sent something the wire format or the handshake does not allow
  kUnknownPeer,    // a hello naming a worker this transport does not know (yet): the initiator retries
  kUnauthenticated // the other end does not hold the job secret (either side): never retried
};

// What the owner answers to an incoming hello.
struct HelloVerdict {
  enum Kind { kAccepted, kDeclined, kRefused } kind = kAccepted;
  FailKind fail = FailKind::kMalformed;  // for kRefused
  std::string why;                       // for kRefused
};

// The transport side of a connection. Every call comes from the connection's strand.
class ConnectionOwner {
 public:
  virtual ~ConnectionOwner() = default;
  // An incoming connection's hello names `worker`. kAccepted: the owner called open_from_strand();
  // kDeclined: the owner closed it (a duplicate); kRefused: the connection fails with `why`.
  virtual HelloVerdict on_hello(const std::shared_ptr<TcpConnection>& conn, uint64_t worker) = 0;
  // The peer answered an outgoing connection's hello: the connection is open.
  virtual void on_accepted(const std::shared_ptr<TcpConnection>& conn) = 0;
  virtual void on_message(const TcpConnection& conn, Message msg) = 0;
  // The connection ended by itself (not through close()); `reason` names the peer and the cause.
  virtual void on_failed(const std::shared_ptr<TcpConnection>& conn, FailKind kind, const std::string& reason) = 0;
  // The socket is closed (after on_failed, or after close()): the owner forgets the connection.
  virtual void on_closed(const TcpConnection& conn) = 0;
};

struct ConnectionContext {
  ConnectionOwner& owner;
  PrefixPool& pool;
  const WireLimits& limits;
  int socket_send_buffer;  // TransportOptions::socket_send_buffer
  std::chrono::milliseconds handshake_timeout;  // TransportOptions::handshake_timeout
  const security::JobSecret& secret;            // the transport's; outlives every connection
};

// Sends made on an io thread while it delivers the frames of one read (handlers that answer inline) wait
// in their connections' queues and are written when the batch ends: one sendmsg() for a burst of replies
// instead of one each. Only the outermost batch on a thread flushes.
class WriteBatch {
 public:
  WriteBatch();
  ~WriteBatch();
  WriteBatch(const WriteBatch&) = delete;
  WriteBatch& operator=(const WriteBatch&) = delete;
  // Whether this thread is inside a batch; if so, `conn` is flushed when it ends.
  static bool defer(TcpConnection& conn);

 private:
  bool owner_ = false;
  std::vector<std::shared_ptr<TcpConnection>> conns_;
};

class TcpConnection : public std::enable_shared_from_this<TcpConnection> {
 public:
  enum class Role { kIncoming, kOutgoing };

  // An accepted socket (its executor is the connection's strand).
  TcpConnection(ConnectionContext ctx, Socket socket);
  // A connection to be made to worker `peer` at `endpoint`.
  TcpConnection(ConnectionContext ctx, Strand strand, int peer, std::string peer_name, tcp::endpoint endpoint);
  ~TcpConnection();
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  // Begin reading (incoming) or connecting (outgoing, then hello from `self_id`). Any thread.
  void start_incoming();
  void start_outgoing(int self_id);

  // Queues a frame and writes it now if the socket is idle. Any thread. Returns false (and leaves `frame`)
  // when the connection is closed.
  bool send(OutFrame& frame);
  // Queues every frame in order (then empties `frames`); one write for all of them.
  void send_all(std::deque<OutFrame>& frames);
  // Closes without calling on_failed; frames still queued are dropped. Any thread; idempotent.
  void close();

  // The owner accepts an incoming connection from `peer`: answers with a hello from `self_id` and opens
  // the connection for messages. Only inside on_hello.
  void open_from_strand(int self_id, int peer, std::string peer_name);

  Role role() const { return role_; }
  // The worker at the other end; -1 until an incoming connection's hello was accepted.
  int peer() const { return peer_.load(std::memory_order_acquire); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // "worker 2 'trainer1' (127.0.0.1:4321)", or the endpoint alone before the hello. On the strand only.
  std::string describe() const;
  // "127.0.0.1:4321": the other end. Any thread.
  const std::string& remote() const { return remote_; }

 private:
  enum class Phase { kConnecting, kAuthenticating, kAwaitHello, kAwaitAccept, kOpen };

  // Reading (tcp_connection.cc).
  void read_more_from_strand();
  void on_read_from_strand(const boost::system::error_code& ec, size_t n);
  void parse_from_strand();
  void on_payload_from_strand(const boost::system::error_code& ec);
  void check_phase_from_strand(const FrameHeader& h) const;
  void handle_frame_from_strand(Message msg);
  void ensure_room_from_strand(size_t bytes);
  void on_io_error_from_strand(const boost::system::error_code& ec, const char* what);
  void fail_from_strand(FailKind kind, const std::string& reason);
  void close_socket_from_strand();
  void arm_deadline_from_strand();
  void socket_ready_from_strand();
  // Runs the handshake; on success `next` begins the hello exchange.
  void authenticate_from_strand(Phase next);

  // Writing (tcp_connection_write.cc).
  friend class WriteBatch;
  void flush_deferred();
  OutFrame make_hello(int self_id);
  void flush_locked();
  void start_async_write_from_strand();
  void on_written_from_strand(const boost::system::error_code& ec);

  ConnectionContext ctx_;
  const Role role_;
  Strand strand_;
  Socket socket_;
  Timer deadline_;
  const std::string remote_;  // "host:port" of the other end
  tcp::endpoint endpoint_;    // outgoing: where to connect
  std::atomic<int> peer_;
  std::string peer_name_;     // strand only
  Phase phase_;               // strand only
  bool stopped_ = false;      // strand only: failed or closed, no more callbacks
  bool socket_closed_ = false;  // strand only

  // Read state (strand only).
  std::vector<uint8_t> rbuf_;
  size_t rpos_ = 0;
  size_t rend_ = 0;
  std::optional<FrameHeader> header_;
  Message incoming_;  // the message whose payload is being read straight into its tensors
  std::vector<asio::mutable_buffer> payload_bufs_;

  // Write state.
  std::mutex mu_;
  std::atomic<bool> closed_{false};  // written under mu_
  int fd_ = -1;                      // under mu_: the socket, once connected; -1 after close
  bool writing_ = false;             // under mu_: a direct write or an async_write owns the socket
  std::deque<OutFrame> queue_;       // under mu_: not yet handed to the socket
  size_t head_written_ = 0;          // under mu_: bytes of queue_.front() a direct write already sent
  std::vector<OutFrame> inflight_;   // strand only: frames of the current async_write
  std::vector<asio::const_buffer> write_bufs_;  // strand only
};

}  // namespace braid::rpc::tcp_detail
