// Reduce-scatter over a gloo context. gloo (2022) has no new-style reduce_scatter; the
// alternative, an allreduce of the whole input followed by taking this rank's block, puts 2(p-1)/p of
// the input per rank on the wire plus a full-size copy. Every algorithm here sends (p-1)/p of it.
//
// Ring: rank r sends to r+1 and receives from r-1. In step s (0 .. p-2) it sends the partial sum of
// block (r-1-s) mod p and receives that of block (r-2-s) mod p, adds its own input block to it, and
// forwards the result in step s+1; after p-1 steps it holds block r reduced over every rank. Each block
// is cut into segments (one for small blocks), so that a segment is forwarded as soon as it is reduced
// while later segments are still on the wire. Receives land in two block-sized scratch buffers used
// alternately; a buffer is reused only after the sends from it completed.
//
// Direct: every rank sends each other rank that rank's block of its input and receives the p-1 copies
// of its own block, all at once, then reduces the p copies in rank order. One step instead of p-1, which
// is what small blocks and oversubscribed ranks (each hop of the ring waits for a context switch) need;
// the ring overlaps reducing with the transfer, which large blocks need.
//
// Registered: the direct exchange on gloo's registered buffers, for blocks up to 64 KiB; each block goes
// in one message instead of an announcement and the data (registered_exchange.h).
#pragma once

#include <gloo/context.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/deadline.h"
#include "collectives/gloo/gloo_reduce.h"

namespace braid::collectives::gloo {

class RegisteredExchange;

// A grow-only scratch area, reused across ops (fresh pages are slow to touch: reusing them keeps that
// cost out of every op after the first). Not thread-safe: one per lane.
class Scratch {
 public:
  uint8_t* get(size_t bytes);

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

struct ReduceScatterArgs {
  const void* input = nullptr;  // size * block_bytes
  void* output = nullptr;       // block_bytes
  size_t block_bytes = 0;
  size_t element_size = 1;
  ReduceFn reduce = nullptr;
  uint32_t tag = 0;
  Deadline deadline = Deadline::never();
};

// The direct exchange for blocks of at most kDirectReduceScatterMaxBlock bytes, else the ring. Throws
// gloo's exceptions (IoException on timeout or a broken connection); the caller maps them.
void reduce_scatter(const std::shared_ptr<::gloo::Context>& context, const ReduceScatterArgs& args,
                    Scratch& scratch);

// The direct exchange on registered buffers (registered_exchange.h), for blocks of at most
// RegisteredExchange::kMaxBlock on 2 or more ranks: one message per block instead of a round trip.
void registered_reduce_scatter(RegisteredExchange& exchange, int rank, int size, const ReduceScatterArgs& args);

}  // namespace braid::collectives::gloo
