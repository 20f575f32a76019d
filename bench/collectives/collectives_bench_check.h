// Buffers and the #wrong check of `braid bench collectives`.
//
// Inputs get a pattern that is a formula of (rank, index), kept to small integers so that every dtype
// holds it exactly; the expected output is the formula's result rounded once to the dtype, which is what
// braid promises for float16/bfloat16 (reduced in float32, rounded once) and exact for the others.
//   allreduce       in(r, j) = (r + j) % 13                 out(j)    = sum_s (s + j) % 13
//   broadcast       in(0, j) = j % 61 + 1, others 0         out(j)    = j % 61 + 1
//   allgather       in(r, i) = (7r + i) % 61                out(sc+i) = (7s + i) % 61
//   reduce_scatter  in(r, j) = (r + j) % 13                 out(r, i) = sum_s (s + rc + i) % 13
//   alltoall        in(r, dc+i) = (7r + 3d + i) % 61        out(r, sc+i) = (7s + 3r + i) % 61
// (c: elements per rank block.)
#pragma once

#include <cstdint>

#include "bench/collectives/collectives_bench_raw.h"
#include "tensor/device.h"

namespace braid::bench {

// Elements in the largest per-rank buffer for a size of `bytes`: rounded down to whole elements and, for
// the ops that split their buffer into one block per rank, to whole blocks; at least one per block.
int64_t bench_elements(BenchOp op, int64_t bytes, DType dtype, int ranks);
// Allocates one size's buffers (`elements` as from bench_elements) on `device`.
BenchBuffers make_bench_buffers(BenchOp op, int64_t elements, DType dtype, int ranks, Device device);
// Writes the pattern into the inputs and zeros into outputs that are separate tensors.
void fill_bench_pattern(BenchOp op, const BenchBuffers& buffers, int rank, int ranks);
// How many output elements differ from the expected values.
int64_t count_wrong(BenchOp op, const BenchBuffers& buffers, int rank, int ranks);

}  // namespace braid::bench
