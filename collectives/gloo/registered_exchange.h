// A one-step exchange of small blocks over gloo's registered buffers, for reduce_scatter.
//
// On unbound buffers every transfer is a round trip: the receiver announces its buffer, and only then
// does the data leave. A registered buffer is known to the sender in advance, so the data leaves at once
// and arrives in one message. That is what gloo's own (old-style) algorithms use, and where its
// halving-doubling reduce_scatter got its lead on 4 ranks at 4 KiB.
//
// A registered buffer may be written again only once its owner has read it. gloo's algorithms send a
// notification back for that (a second message per transfer). Here every rank receives from every other
// rank in each exchange, so two receive areas used alternately are enough: a rank sends its exchange k to
// peer q only after finishing exchange k-1, which needed q's data of k-1, which q sent only after finishing
// exchange k-2 -- so q has read the area that exchange k uses (the same parity as k-2). No notifications.
//
// The exchange runs on a context of its own, connected on first use: gloo's tcp pair pins a socket's
// send buffer (SO_SNDBUF, which ends the kernel's autotuning) at twice the size of the first registered
// message sent on it; on the context of the lane's other collectives that made every later unbound
// transfer over the pinned size stall for tens of milliseconds (2 ranks, 256 KiB reduce_scatter after a
// 64 KiB one: 26 ms per call).
//
// Every rank must make the same calls in the same order (a lane's ops are). The buffers are made on the
// first exchange and again when a larger block comes; a barrier follows, so no data arrives for a buffer
// its receiver has not registered yet (gloo's event loop would leave it unread and spin on it).
//
// Waits on registered buffers take the pair's timeout, not the op's deadline: the context connects with a
// 100-hour pair timeout as a mere backstop, and the lane's DeadlineWatchdog calls abort() when the op's
// deadline passes.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "base/deadline.h"

namespace braid::collectives::gloo {

class RegisteredExchange {
 public:
  // Blocks up to this many bytes take the exchange (its areas hold 2 * size blocks of at most this).
  static constexpr size_t kMaxBlock = 64 * 1024;

  // Connects the exchange's context (every rank calls it at the same op); `deadline` bounds the rendezvous.
  using Connect = std::function<std::shared_ptr<::gloo::Context>(const Deadline& deadline)>;

  explicit RegisteredExchange(Connect connect);
  ~RegisteredExchange();
  RegisteredExchange(const RegisteredExchange&) = delete;
  RegisteredExchange& operator=(const RegisteredExchange&) = delete;

  // Whether abort() can stop a wait in this process (it needs gloo's tcp buffers); where it cannot, the
  // exchange is not used. The same on every rank of a job (the same library).
  static bool available();

  // Sends block q of `input` (size * block bytes, rank-major) to each rank q != rank and waits for every
  // peer's copy of this rank's block; copy_from(q) then points at it until the next call. `tag` is the
  // op's, for the barrier after (re)making buffers. Throws gloo's exceptions, or IoException once aborted.
  void exchange(const uint8_t* input, size_t block, uint32_t tag, const Deadline& deadline);
  const uint8_t* copy_from(int peer) const;

  // Wakes a wait in exchange() and makes it, and every later call, throw. Any thread.
  void abort();

  // Whether the exchange connected and never failed: its peers may then still be reading their last
  // exchange. gloo's registered buffers report a closed connection before data that already arrived, so
  // the owner lets every peer finish before closing (GlooEngine's destructor, through the store).
  bool in_use() const { return context_ != nullptr && !aborted_.load(); }

 private:
  void exchange_once(const uint8_t* input, size_t block, uint32_t tag, const Deadline& deadline);
  void make_buffers(size_t capacity, uint32_t tag, const Deadline& deadline);

  Connect connect_;
  std::shared_ptr<::gloo::Context> context_;
  size_t capacity_ = 0;  // bytes per peer and area
  int slots_ = 0;        // the first of the four slots the buffers use
  uint64_t exchanges_ = 0;
  int current_ = 0;  // the area the last exchange received into
  std::vector<uint8_t> areas_[2];                                     // size blocks of capacity_ each
  std::vector<std::unique_ptr<::gloo::transport::Buffer>> recvs_[2];  // per peer and area (null for self)
  std::vector<std::unique_ptr<::gloo::transport::Buffer>> sends_;     // per peer, for one exchange
  std::atomic<bool> aborted_{false};
  std::mutex buffers_mu_;  // abort() against the buffers being made
};

}  // namespace braid::collectives::gloo
