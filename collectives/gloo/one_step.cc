#include "collectives/gloo/one_step.h"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <cstring>

#include "collectives/gloo/gloo_timeout.h"
#include "collectives/gloo/unbound_sends.h"

namespace braid::collectives::gloo {

namespace {

// Slot prefix: gloo's own collectives use 0x01 .. 0x08, reduce_scatter.cc 0x21 and 0x22; each op has its
// own tag besides.
constexpr uint8_t kOneStepAllgatherSlotPrefix = 0x23;

}  // namespace

void one_step_allgather(const std::shared_ptr<::gloo::Context>& context, const void* input, void* output,
                        size_t block_bytes, uint32_t tag, const Deadline& deadline) {
  if (block_bytes == 0) return;
  const int p = context->size;
  const int r = context->rank;
  const auto slot = ::gloo::Slot::build(kOneStepAllgatherSlotPrefix, tag);
  auto* out = static_cast<uint8_t*>(output);
  auto received = context->createUnboundBuffer(out, block_bytes * static_cast<size_t>(p));
  SendSide from_input{context->createUnboundBuffer(const_cast<void*>(input), block_bytes)};
  // Receives first: a send whose receive is already posted goes out without a round trip.
  for (int i = 1; i < p; ++i) {
    const int from = (r - i + p) % p;
    received->recv(from, slot, static_cast<size_t>(from) * block_bytes, block_bytes);
  }
  for (int i = 1; i < p; ++i) from_input.send((r + i) % p, slot, 0, block_bytes);
  uint8_t* own = out + static_cast<size_t>(r) * block_bytes;
  if (own != input) std::memcpy(own, input, block_bytes);  // while the messages move
  for (int i = 1; i < p; ++i) received->waitRecv(gloo_timeout(deadline));
  from_input.wait_all(deadline);
}

}  // namespace braid::collectives::gloo
