// Private to rpc/tcp: outgoing frames, the pool their prefix buffers come from, and the small Asio
// adaptors the connection's reads and writes use.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "rpc/message.h"

namespace braid::rpc::tcp_detail {

namespace asio = boost::asio;

// A message on its way out: the message keeps its tensors (whose storage the write gathers from) alive
// until the write completed; `prefix` holds header + table + meta (frame_prefix()).
struct OutFrame {
  Message msg;
  std::vector<uint8_t> prefix;
};

// The frame's length on the wire: its prefix and every tensor's bytes.
inline size_t frame_bytes(const OutFrame& frame) {
  size_t n = frame.prefix.size();
  for (const auto& t : frame.msg.tensors) n += t.nbytes();
  return n;
}

// Reused prefix buffers: first-touched memory is slow here, and most prefixes are small, so a buffer goes
// back to the pool after its frame was written and the next send takes it with its capacity.
class PrefixPool {
 public:
  std::vector<uint8_t> take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) return {};
    std::vector<uint8_t> buf = std::move(free_.back());
    free_.pop_back();
    return buf;
  }
  void give(std::vector<uint8_t>&& buf) {
    // Large prefixes (big metas) are rare: freeing them keeps the pool's memory bounded.
    if (buf.capacity() == 0 || buf.capacity() > kMaxPooledBytes) return;
    buf.clear();
    std::lock_guard lock(mu_);
    if (free_.size() < kMaxPooled) free_.push_back(std::move(buf));
  }

 private:
  static constexpr size_t kMaxPooled = 256;
  static constexpr size_t kMaxPooledBytes = 64 * 1024;
  std::mutex mu_;
  std::vector<std::vector<uint8_t>> free_;
};

// A buffer sequence over a vector the connection owns and reuses, so that Asio's composed read/write
// keeps a view instead of copying the vector for every operation.
template <class Buffer>
struct BufferView {
  const Buffer* first = nullptr;
  const Buffer* last = nullptr;
  explicit BufferView(const std::vector<Buffer>& v) : first(v.data()), last(v.data() + v.size()) {}
  const Buffer* begin() const { return first; }
  const Buffer* end() const { return last; }
};

// async_read/async_write until every buffer is done, without transfer_all's 64 KiB cap per system call
// (a 16 MiB tensor would otherwise take 256 round trips through the scheduler).
struct TransferAll {
  size_t operator()(const boost::system::error_code& ec, size_t /*done*/) const {
    return ec ? 0 : std::numeric_limits<size_t>::max();
  }
};

}  // namespace braid::rpc::tcp_detail
