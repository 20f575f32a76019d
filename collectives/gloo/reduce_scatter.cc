#include "collectives/gloo/reduce_scatter.h"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "base/check.h"
#include "collectives/gloo/gloo_timeout.h"
#include "collectives/gloo/registered_exchange.h"
#include "collectives/gloo/unbound_sends.h"

namespace braid::collectives::gloo {

namespace {

// Slot prefixes of these algorithms; gloo's own collectives use 0x01 .. 0x08, and each op has its own tag.
constexpr uint8_t kRingReduceScatterSlotPrefix = 0x21;
constexpr uint8_t kDirectReduceScatterSlotPrefix = 0x22;
// Blocks up to this size take the direct exchange. 4 ranks on the 2-core VM (2 per core), braid
// reduce_scatter_tensor, µs per call, ring -> direct: 4 KiB input 384-413 -> 269-295, 64 KiB 400 ->
// 276-313, 1 MiB (256 KiB blocks) 930-988 -> 695-717; but 4 MiB (1 MiB blocks) 2747-2905 -> 3146-3240,
// where the ring's overlap of reducing with the transfer pays. 16 MiB: the same either way. 2 ranks, where
// both are one step but the ring cuts blocks over 64 KiB into two segments, against raw halving-doubling
// (paired), ring -> direct: 256 KiB input 1.06-1.08x -> 0.73-0.76x, 1 MiB 1.18-1.19x -> 0.99-1.02x; 2 MiB
// (1 MiB blocks) 0.74-0.83x -> 0.88-0.97x and 4 MiB 0.65-0.68x -> 0.90-0.93x, so the line is the same.
constexpr size_t kDirectReduceScatterMaxBlock = 512 * 1024;
// Blocks up to this size go as one segment (more segments only add per-message latency); larger ones
// are cut into segments of at most kMaxSegmentBytes, and at least two, to overlap reducing with I/O.
constexpr size_t kSplitAbove = 64 * 1024;
constexpr size_t kMaxSegmentBytes = 512 * 1024;

struct Segments {
  size_t bytes;  // of every segment but the last
  size_t count;
  size_t offset(size_t k) const { return k * bytes; }
  size_t length(size_t k, size_t total) const { return std::min(bytes, total - k * bytes); }
};

Segments segments_for(size_t block_bytes, size_t element_size) {
  if (block_bytes <= kSplitAbove) return {block_bytes, 1};
  const size_t wanted = std::max<size_t>(2, (block_bytes + kMaxSegmentBytes - 1) / kMaxSegmentBytes);
  size_t bytes = (block_bytes + wanted - 1) / wanted;
  bytes = (bytes + element_size - 1) / element_size * element_size;
  return {bytes, (block_bytes + bytes - 1) / bytes};
}

// output = the p copies of this rank's block reduced in rank order, so that the result does not depend on
// which copy arrived first; copy_of(q) is rank q's copy.
template <class CopyOf>
void reduce_in_rank_order(const ReduceScatterArgs& a, int p, CopyOf&& copy_of) {
  auto* output = static_cast<uint8_t*>(a.output);
  const size_t n = a.block_bytes / a.element_size;
  a.reduce(output, copy_of(0), copy_of(1), n);
  for (int q = 2; q < p; ++q) a.reduce(output, output, copy_of(q), n);
}

// The direct exchange (reduce_scatter.h); p >= 2, block > 0.
void direct_reduce_scatter(const std::shared_ptr<::gloo::Context>& context, const ReduceScatterArgs& a,
                           Scratch& scratch) {
  const int p = context->size;
  const int r = context->rank;
  const size_t block = a.block_bytes;
  const auto* input = static_cast<const uint8_t*>(a.input);
  const auto slot = ::gloo::Slot::build(kDirectReduceScatterSlotPrefix, a.tag);
  // copies[q]: rank q's copy of this rank's block; this rank's own slot stays unused.
  uint8_t* copies = scratch.get(block * static_cast<size_t>(p));
  auto received = context->createUnboundBuffer(copies, block * static_cast<size_t>(p));
  SendSide from_input{context->createUnboundBuffer(const_cast<uint8_t*>(input), block * static_cast<size_t>(p))};
  for (int i = 1; i < p; ++i) {
    const int from = (r - i + p) % p;
    received->recv(from, slot, static_cast<size_t>(from) * block, block);
  }
  for (int i = 1; i < p; ++i) {
    const int to = (r + i) % p;
    from_input.send(to, slot, static_cast<size_t>(to) * block, block);
  }
  for (int i = 1; i < p; ++i) received->waitRecv(gloo_timeout(a.deadline));
  reduce_in_rank_order(a, p, [&](int q) {
    return q == r ? input + static_cast<size_t>(q) * block : copies + static_cast<size_t>(q) * block;
  });
  from_input.wait_all(a.deadline);
}

// The ring (reduce_scatter.h); p >= 2, block > 0.
void ring_reduce_scatter(const std::shared_ptr<::gloo::Context>& context, const ReduceScatterArgs& a,
                         Scratch& scratch) {
  const int p = context->size;
  const int r = context->rank;
  const size_t block = a.block_bytes;
  const auto* input = static_cast<const uint8_t*>(a.input);
  auto* output = static_cast<uint8_t*>(a.output);
  const Segments seg = segments_for(block, a.element_size);
  const int right = (r + 1) % p;
  const int left = (r + p - 1) % p;
  const auto slot = ::gloo::Slot::build(kRingReduceScatterSlotPrefix, a.tag);
  auto mod = [p](int x) { return ((x % p) + p) % p; };

  // The input is only ever sent from, never written.
  SendSide from_input{context->createUnboundBuffer(const_cast<uint8_t*>(input), block * static_cast<size_t>(p))};
  uint8_t* area = scratch.get(2 * block);
  std::array<uint8_t*, 2> partial = {area, area + block};
  std::array<std::unique_ptr<::gloo::transport::UnboundBuffer>, 2> recv_into;
  std::array<SendSide, 2> send_from;
  for (int i = 0; i < 2; ++i) {
    recv_into[i] = context->createUnboundBuffer(partial[i], block);
    send_from[i].buffer = context->createUnboundBuffer(partial[i], block);
  }

  for (int s = 0; s <= p - 2; ++s) {
    const int cur = s % 2;
    // partial[cur] last held step s-2's result, forwarded as step s-1's sends: they must be done.
    send_from[cur].wait_all(a.deadline);
    // Receives first: a send whose receive is already posted goes out without a round trip.
    for (size_t k = 0; k < seg.count; ++k) recv_into[cur]->recv(left, slot, seg.offset(k), seg.length(k, block));
    if (s == 0) {
      // Step 0 sends this rank's own input block r-1.
      const size_t first = static_cast<size_t>(mod(r - 1)) * block;
      for (size_t k = 0; k < seg.count; ++k) from_input.send(right, slot, first + seg.offset(k), seg.length(k, block));
    }
    const bool last = s == p - 2;
    const uint8_t* own = input + static_cast<size_t>(mod(r - 2 - s)) * block;
    for (size_t k = 0; k < seg.count; ++k) {
      // Segments from one peer on one slot complete in the order they were posted.
      recv_into[cur]->waitRecv(gloo_timeout(a.deadline));
      const size_t off = seg.offset(k);
      const size_t len = seg.length(k, block);
      uint8_t* dst = last ? output + off : partial[cur] + off;
      a.reduce(dst, partial[cur] + off, own + off, len / a.element_size);
      if (!last) send_from[cur].send(right, slot, off, len);
    }
  }
  from_input.wait_all(a.deadline);
  send_from[0].wait_all(a.deadline);
  send_from[1].wait_all(a.deadline);
}

}  // namespace

uint8_t* Scratch::get(size_t bytes) {
  if (bytes > size_) {
    data_.reset(new uint8_t[bytes]);  // uninitialised on purpose: every byte is received before it is read
    size_ = bytes;
  }
  return data_.get();
}

void reduce_scatter(const std::shared_ptr<::gloo::Context>& context, const ReduceScatterArgs& args,
                    Scratch& scratch) {
  const size_t block = args.block_bytes;
  if (block == 0) return;
  if (context->size == 1) {
    std::memcpy(args.output, args.input, block);
    return;
  }
  BRAID_ASSERT(block % args.element_size == 0, "block of {} bytes, element size {}", block, args.element_size);
  if (block <= kDirectReduceScatterMaxBlock) {
    direct_reduce_scatter(context, args, scratch);
  } else {
    ring_reduce_scatter(context, args, scratch);
  }
}

void registered_reduce_scatter(RegisteredExchange& exchange, int rank, int size, const ReduceScatterArgs& args) {
  BRAID_ASSERT(size >= 2 && args.block_bytes % args.element_size == 0, "block of {} bytes, element size {}, {} ranks",
               args.block_bytes, args.element_size, size);
  const auto* input = static_cast<const uint8_t*>(args.input);
  exchange.exchange(input, args.block_bytes, args.tag, args.deadline);
  reduce_in_rank_order(args, size, [&](int q) {
    return q == rank ? input + static_cast<size_t>(q) * args.block_bytes : exchange.copy_from(q);
  });
}

}  // namespace braid::collectives::gloo
