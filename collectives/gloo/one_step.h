// Allgather (small and medium messages) and alltoall in one step, on unbound buffers.
//
// gloo's allgather is a ring of 2(p-1) dependent half-block steps. Each step waits for the peer's previous
// one, and every transfer on unbound buffers is a round trip (the receiver announces its buffer, then the
// data comes); when ranks share cores every wait is also a context switch: on 4 ranks over 2 cores a
// 4 KiB allgather took ~500 us, of which the bytes are a few. Here each rank posts its receives from every
// other rank and sends its block to each, all at once: the same p-1 blocks per rank leave and arrive as
// in the ring, in one step. The ring still wins for large blocks, where its pipelining overlaps the
// copies; process_group_gloo.cc chooses by size (the measurements are there).
//
// Alltoall is one step in gloo too, but gloo posts each send before the matching receive; here every
// receive is posted first, as in the allgather, except on more than 2 ranks with blocks up to 64 KiB,
// where gloo's order measured cheaper (one_step.cc).
//
// A one-step broadcast (the root sending to every rank at once) was measured against gloo's binomial tree
// on 3 and 4 ranks from 4 KiB to 16 MiB and was no faster anywhere, so a broadcast across hosts stays
// gloo's; on one host it goes through shared memory (collectives/shm/broadcast.h).
#pragma once

#include <gloo/context.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/deadline.h"

namespace braid::collectives::gloo {

// output holds size * block_bytes bytes, rank-major; input holds block_bytes (it may be output's own
// block). Throws gloo's exceptions; the caller maps them.
void one_step_allgather(const std::shared_ptr<::gloo::Context>& context, const void* input, void* output,
                        size_t block_bytes, uint32_t tag, const Deadline& deadline);

// Block q of input (send_counts[q] elements at element offset send_offsets[q]) goes to rank q, whose block
// for this rank lands at recv_offsets[q] (recv_counts[q] elements): the group's vectors, not copies. Empty
// blocks are skipped: a peer expects from this rank exactly what this rank sends it. Throws gloo's
// exceptions; the caller maps them.
struct AlltoallBlocks {
  const std::vector<int64_t>& send_counts;
  const std::vector<int64_t>& send_offsets;
  const std::vector<int64_t>& recv_counts;
  const std::vector<int64_t>& recv_offsets;
  size_t element_size;
};
void one_step_alltoall(const std::shared_ptr<::gloo::Context>& context, const void* input, size_t input_bytes,
                       void* output, size_t output_bytes, const AlltoallBlocks& blocks, uint32_t tag,
                       const Deadline& deadline);

}  // namespace braid::collectives::gloo
