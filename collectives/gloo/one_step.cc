#include "collectives/gloo/one_step.h"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>

#include "base/copy_bytes.h"
#include "collectives/gloo/gloo_timeout.h"
#include "collectives/gloo/unbound_sends.h"

namespace braid::collectives::gloo {

namespace {

// Slot prefixes: gloo's own collectives use 0x01 .. 0x08, reduce_scatter.cc 0x21 and 0x22; each op has
// its own tag besides.
constexpr uint8_t kOneStepAllgatherSlotPrefix = 0x23;
constexpr uint8_t kOneStepAlltoallSlotPrefix = 0x24;

// Alltoall's order of posting. Receives first, unlike gloo, lets a send whose receive the peer has
// already announced leave at once from this thread instead of later from gloo's event loop: better on 2
// ranks at every size and for large blocks. On more ranks with small blocks gloo's order (sends first)
// cost less: braid / raw gloo::alltoall, 4 ranks on 2 cores, paired medians of 5 alternated runs, receives
// first -> sends first: 4 KiB 1.08x -> 1.01x (CPU per call, all ranks, +34 -> +10 us over raw), 64 KiB
// 1.11x -> 1.08x, but 1 MiB 1.04x -> 1.08x; 2 ranks 4 KiB 0.66x -> 0.79x, 1 MiB 0.98x -> 1.06x.
constexpr size_t kSendsFirstMaxBlock = 64 * 1024;

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
  if (own != input) copy_bytes(own, input, block_bytes);  // while the messages move
  for (int i = 1; i < p; ++i) received->waitRecv(gloo_timeout(deadline));
  from_input.wait_all(deadline);
}

void one_step_alltoall(const std::shared_ptr<::gloo::Context>& context, const void* input, size_t input_bytes,
                       void* output, size_t output_bytes, const AlltoallBlocks& blocks, uint32_t tag,
                       const Deadline& deadline) {
  const int p = context->size;
  const int r = context->rank;
  const auto slot = ::gloo::Slot::build(kOneStepAlltoallSlotPrefix, tag);
  const auto bytes = [&](const std::vector<int64_t>& v, int q) {  // entry q of a count or offset, in bytes
    return static_cast<size_t>(v[static_cast<size_t>(q)]) * blocks.element_size;
  };
  // gloo refuses an unbound buffer of size 0; a rank with nothing to send or receive uses a 1-byte stand-in
  // that no message touches.
  uint8_t unused = 0;
  auto* out = static_cast<uint8_t*>(output);
  auto received = context->createUnboundBuffer(output_bytes > 0 ? output : &unused, std::max<size_t>(output_bytes, 1));
  SendSide from_input{context->createUnboundBuffer(input_bytes > 0 ? const_cast<void*>(input) : &unused,
                                                   std::max<size_t>(input_bytes, 1))};
  // This rank's own block first, as gloo does. 4-16 MiB on 2 ranks, against raw gloo::alltoall: copied
  // while the messages moved 1.10-1.25x, after them 1.02-1.25x, first 1.01-1.13x (the copy competes with
  // the receiving thread for the core and the memory bus).
  if (bytes(blocks.send_counts, r) > 0) {
    copy_bytes(out + bytes(blocks.recv_offsets, r), static_cast<const uint8_t*>(input) + bytes(blocks.send_offsets, r),
               bytes(blocks.send_counts, r));
  }
  size_t receives = 0;
  const auto post_receives = [&] {
    for (int i = 1; i < p; ++i) {
      const int from = (r - i + p) % p;
      if (bytes(blocks.recv_counts, from) == 0) continue;
      received->recv(from, slot, bytes(blocks.recv_offsets, from), bytes(blocks.recv_counts, from));
      ++receives;
    }
  };
  const auto post_sends = [&] {
    for (int i = 1; i < p; ++i) {
      const int to = (r + i) % p;
      if (bytes(blocks.send_counts, to) == 0) continue;
      from_input.send(to, slot, bytes(blocks.send_offsets, to), bytes(blocks.send_counts, to));
    }
  };
  // Which goes first is this rank's own choice (a peer matches by slot either way); see kSendsFirstMaxBlock.
  const int64_t largest = *std::max_element(blocks.send_counts.begin(), blocks.send_counts.end());
  if (p > 2 && static_cast<size_t>(largest) * blocks.element_size <= kSendsFirstMaxBlock) {
    post_sends();
    post_receives();
  } else {
    post_receives();
    post_sends();
  }
  for (; receives > 0; --receives) received->waitRecv(gloo_timeout(deadline));
  from_input.wait_all(deadline);
}

}  // namespace braid::collectives::gloo
