#include "collectives/gloo/registered_exchange.h"

#include <dlfcn.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>

#include <bit>
#include <cstring>
#include <typeinfo>

#include "base/check.h"
#include "collectives/gloo/gloo_timeout.h"

namespace braid::collectives::gloo {

namespace {

// A pair carries both directions on one set of slot numbers, and a buffer's destruction unregisters its
// slot: the direction is part of the slot, so a send buffer made and dropped per exchange never touches
// the receive buffer of the other direction.
int slot_for(int first, int area, int sender, int receiver) { return first + 2 * area + (sender < receiver ? 0 : 1); }

// gloo::transport::tcp::Buffer::handleRecvCompletion() is what gloo's event loop calls when data arrived;
// called once more, it wakes the buffer's waiter. Debian's gloo headers for the tcp transport include a
// header the package does not ship, so the public member is reached through its exported symbol (a
// non-virtual member function takes `this` as its only argument), and only for objects whose dynamic type
// is that class (whose only base is transport::Buffer, so the pointers agree).
using WakeFn = void (*)(void*);
constexpr const char* kTcpBufferType = "N4gloo9transport3tcp6BufferE";

WakeFn wake_function() {
  static const WakeFn fn =
      reinterpret_cast<WakeFn>(dlsym(RTLD_DEFAULT, "_ZN4gloo9transport3tcp6Buffer20handleRecvCompletionEv"));
  return fn;
}

bool is_tcp_buffer(const ::gloo::transport::Buffer& buffer) {
  return std::strcmp(typeid(buffer).name(), kTcpBufferType) == 0;
}

[[noreturn]] void throw_aborted() {
  throw ::gloo::IoException("registered-buffer exchange stopped: an op's deadline passed on this lane");
}

}  // namespace

bool RegisteredExchange::available() { return wake_function() != nullptr; }

RegisteredExchange::RegisteredExchange(Connect connect) : connect_(std::move(connect)) {}

RegisteredExchange::~RegisteredExchange() = default;

void RegisteredExchange::make_buffers(size_t capacity, uint32_t tag, const Deadline& deadline) {
  if (!context_) context_ = connect_(deadline);  // abort() never reads the context: no lock needed
  {
    std::lock_guard lock(buffers_mu_);
    const int p = context_->size;
    const int r = context_->rank;
    for (auto& area : recvs_) area.clear();
    slots_ = context_->nextSlot(4);
    capacity_ = capacity;
    for (int k = 0; k < 2; ++k) {
      areas_[k].assign(capacity * static_cast<size_t>(p), 0);  // touched once here, reused after
      recvs_[k].resize(static_cast<size_t>(p));
      for (int q = 0; q < p; ++q) {
        if (q == r) continue;
        auto buffer = context_->getPair(q)->createRecvBuffer(
            slot_for(slots_, k, q, r), areas_[k].data() + static_cast<size_t>(q) * capacity, capacity);
        BRAID_ASSERT(is_tcp_buffer(*buffer), "gloo registered buffer of type {}", typeid(*buffer).name());
        recvs_[k][static_cast<size_t>(q)] = std::move(buffer);
      }
    }
  }
  // Every rank has registered its receive buffers once this returns; only then may data come.
  ::gloo::BarrierOptions opts(context_);
  opts.setTag(tag);
  opts.setTimeout(gloo_timeout(deadline));
  ::gloo::barrier(opts);
}

void RegisteredExchange::exchange(const uint8_t* input, size_t block, uint32_t tag, const Deadline& deadline) {
  BRAID_ASSERT(block > 0 && block <= kMaxBlock, "registered exchange of {} bytes per block", block);
  if (aborted_.load()) throw_aborted();
  try {
    exchange_once(input, block, tag, deadline);
  } catch (...) {
    // A failed exchange leaves receives unconsumed and sends perhaps in flight: it is never used again,
    // and its send buffers stay alive until it is destroyed.
    aborted_.store(true);
    throw;
  }
}

void RegisteredExchange::exchange_once(const uint8_t* input, size_t block, uint32_t tag, const Deadline& deadline) {
  if (block > capacity_) {
    make_buffers(std::bit_ceil(block), tag, deadline);
    // An abort() before the new buffers were in place woke only the old ones.
    if (aborted_.load()) throw_aborted();
  }
  const int p = context_->size;
  const int r = context_->rank;
  const int area = static_cast<int>(exchanges_++ % 2);
  sends_.resize(static_cast<size_t>(p));
  for (int i = 1; i < p; ++i) {
    const int to = (r + i) % p;
    // Send buffers are cheap to make (nothing is registered remotely) and point at this op's input.
    auto& send = sends_[static_cast<size_t>(to)];
    send = context_->getPair(to)->createSendBuffer(slot_for(slots_, area, r, to), const_cast<uint8_t*>(input),
                                                   block * static_cast<size_t>(p));
    send->send(static_cast<size_t>(to) * block, block, 0);
  }
  for (int i = 1; i < p; ++i) {
    const int from = (r - i + p) % p;
    recvs_[area][static_cast<size_t>(from)]->waitRecv();
    if (aborted_.load()) throw_aborted();
  }
  for (auto& send : sends_) {
    if (!send) continue;
    send->waitSend();
    send.reset();
  }
  current_ = area;
}

const uint8_t* RegisteredExchange::copy_from(int peer) const {
  return areas_[current_].data() + static_cast<size_t>(peer) * capacity_;
}

void RegisteredExchange::abort() {
  aborted_.store(true);
  const WakeFn wake = wake_function();
  std::lock_guard lock(buffers_mu_);
  for (auto& area : recvs_) {
    for (auto& buffer : area) {
      // One completion more than arrived: the waiter returns and sees aborted_.
      if (buffer) wake(buffer.get());
    }
  }
}

}  // namespace braid::collectives::gloo
