// TcpConnection: the write queue.
//
// A frame is written as a gather of its prefix and its tensors' storage. Whoever finds the socket idle
// (writing_ false) owns it: send() first tries one non-blocking sendmsg() from the calling thread, which
// on an idle connection usually writes the whole frame without waking any io thread. The rest, and every
// frame queued while the socket is owned, goes out through async_write on the strand, all queued frames
// in one buffer sequence. Frame order is queue order, and the queue only grows under mu_, so messages to
// one peer leave in send order whichever thread writes them.
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>

#include "base/logging.h"
#include "rpc/tcp/tcp_connection.h"

namespace braid::rpc::tcp_detail {

namespace {

// iovecs of one direct sendmsg(); what does not fit goes through the async path.
constexpr size_t kMaxDirectIov = 64;
// Buffers of one async_write (Asio hands them to the kernel 64 at a time).
constexpr size_t kMaxAsyncBuffers = 1024;

// Calls add(pointer, length) for each piece of `frame` after its first `skip` bytes.
template <class Add>
bool for_each_piece(const OutFrame& frame, size_t& skip, Add&& add) {
  auto piece = [&](const uint8_t* data, size_t len) {
    if (skip >= len) {
      skip -= len;
      return true;
    }
    const bool more = add(data + skip, len - skip);
    skip = 0;
    return more;
  };
  if (!piece(frame.prefix.data(), frame.prefix.size())) return false;
  for (const auto& t : frame.msg.tensors) {
    if (t.nbytes() == 0) continue;
    if (!piece(static_cast<const uint8_t*>(t.data_ptr()), t.nbytes())) return false;
  }
  return true;
}

thread_local WriteBatch* tl_batch = nullptr;

}  // namespace

WriteBatch::WriteBatch() {
  if (tl_batch == nullptr) {
    tl_batch = this;
    owner_ = true;
  }
}

WriteBatch::~WriteBatch() {
  if (!owner_) return;
  tl_batch = nullptr;
  for (const auto& conn : conns_) {
    try {
      conn->flush_deferred();
    } catch (const std::exception& e) {
      // Only an allocation failure can land here; the frames stay queued for the next write.
      logging::get("braid.rpc")->error("tcp transport: flushing the replies to {} failed: {}", conn->remote(),
                                       e.what());
    }
  }
}

bool WriteBatch::defer(TcpConnection& conn) {
  if (tl_batch == nullptr) return false;
  for (const auto& c : tl_batch->conns_) {
    if (c.get() == &conn) return true;
  }
  tl_batch->conns_.push_back(conn.shared_from_this());
  return true;
}

void TcpConnection::flush_deferred() {
  std::lock_guard lock(mu_);
  if (!closed_.load(std::memory_order_relaxed) && !writing_ && fd_ >= 0 && !queue_.empty()) flush_locked();
}

OutFrame TcpConnection::make_hello(int self_id) {
  OutFrame hello;
  hello.msg.type = MessageType::kHello;
  hello.msg.id = static_cast<uint64_t>(self_id);
  hello.prefix = ctx_.pool.take();
  frame_prefix(hello.msg, hello.prefix);
  return hello;
}

bool TcpConnection::send(OutFrame& frame) {
  std::lock_guard lock(mu_);
  if (closed_.load(std::memory_order_relaxed)) return false;
  queue_.push_back(std::move(frame));
  if (!writing_ && fd_ >= 0 && !WriteBatch::defer(*this)) flush_locked();
  return true;
}

void TcpConnection::send_all(std::deque<OutFrame>& frames) {
  std::lock_guard lock(mu_);
  if (!closed_.load(std::memory_order_relaxed)) {
    for (auto& f : frames) queue_.push_back(std::move(f));
    if (!writing_ && fd_ >= 0 && !queue_.empty() && !WriteBatch::defer(*this)) flush_locked();
  }
  frames.clear();
}

// mu_ held, the socket idle and connected, queue_ not empty: take the socket, write what the kernel
// takes without blocking, and hand the rest to the strand.
void TcpConnection::flush_locked() {
  writing_ = true;
  std::array<iovec, kMaxDirectIov> iov;
  size_t niov = 0;
  size_t skip = head_written_;
  for (const auto& frame : queue_) {
    const bool more = for_each_piece(frame, skip, [&](const uint8_t* data, size_t len) {
      iov[niov].iov_base = const_cast<uint8_t*>(data);
      iov[niov].iov_len = len;
      return ++niov < iov.size();
    });
    if (!more) break;
  }
  msghdr mh{};
  mh.msg_iov = iov.data();
  mh.msg_iovlen = niov;
  // MSG_DONTWAIT: never block the sender; MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE. Any error
  // other than a full socket is left for the async write, which reports it from the strand.
  const ssize_t n = ::sendmsg(fd_, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  size_t done = head_written_ + (n > 0 ? static_cast<size_t>(n) : 0);
  while (!queue_.empty()) {
    const size_t bytes = frame_bytes(queue_.front());
    if (done < bytes) break;
    done -= bytes;
    ctx_.pool.give(std::move(queue_.front().prefix));
    queue_.pop_front();
  }
  head_written_ = done;
  if (queue_.empty()) {
    writing_ = false;
    return;
  }
  asio::post(strand_, [self = shared_from_this()] { self->start_async_write_from_strand(); });
}

void TcpConnection::start_async_write_from_strand() {
  if (stopped_) return;
  {
    std::lock_guard lock(mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    inflight_.clear();
    write_bufs_.clear();
    size_t skip = head_written_;
    head_written_ = 0;
    while (!queue_.empty() && write_bufs_.size() < kMaxAsyncBuffers) {
      for_each_piece(queue_.front(), skip, [&](const uint8_t* data, size_t len) {
        write_bufs_.emplace_back(data, len);
        return true;
      });
      inflight_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  asio::async_write(socket_, BufferView<asio::const_buffer>(write_bufs_), TransferAll{},
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      self->on_written_from_strand(ec);
                    });
}

void TcpConnection::on_written_from_strand(const boost::system::error_code& ec) {
  if (stopped_ || ec) {
    inflight_.clear();
    if (ec) on_io_error_from_strand(ec, "failed while writing");
    return;
  }
  for (auto& f : inflight_) ctx_.pool.give(std::move(f.prefix));
  inflight_.clear();
  {
    std::lock_guard lock(mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    if (queue_.empty()) {
      writing_ = false;
      return;
    }
  }
  start_async_write_from_strand();
}

}  // namespace braid::rpc::tcp_detail
