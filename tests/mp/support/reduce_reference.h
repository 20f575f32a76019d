// The reference model behind the reduction × dtype tests: what rank r contributes for (op, dtype), whether
// the group must refuse the pair, and what the reduction over every rank must give.
//
// Every rank can compute every other rank's input, so expectations need no communication. The inputs are
// chosen so that the exact result is known and lands where the semantics matter:
//   * integers wrap (int8/uint8 sums overflow at 2 ranks, int64 products overflow 64 bits), and int64
//     values above 2^53 catch a detour through double;
//   * bool reduces logically (SUM/MAX/BOR = or, PRODUCT/MIN/BAND = and, BXOR = parity);
//   * float16/bfloat16 results are the exact result rounded once (an accumulation in the 16-bit type
//     would lose the small addends next to a large one), float32/float64 results are exact;
//   * AVG divides the exact sum by the world size, PREMUL_SUM(0.5) halves each input before summing;
//   * bitwise ops on floating types, and AVG/PREMUL_SUM on integers and bool, are refused with
//     "unsupported reduction operation" before anything is sent.
#pragma once

#include <string>
#include <vector>

#include "collectives/core/reduce_op.h"
#include "tensor/tensor.h"

namespace braid::mp {

// SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR and PREMUL_SUM(0.5).
std::vector<collectives::ReduceOp> all_reduce_ops();

// "SUM/int8" for test messages.
std::string case_name(collectives::ReduceOp op, DType dtype);

// Whether a reduction with `op` on `dtype` must be refused.
// torch's simple_reduce_tests(rank, world_size) (test_c10d_gloo.py): one tensor per rank, float32 for SUM,
// PRODUCT, MIN and MAX, int32 for BAND, BOR and BXOR, with the expected result of every rank.
struct SimpleReduceCase {
  collectives::ReduceOp op;
  Tensor input;
  Tensor expected;
};
std::vector<SimpleReduceCase> simple_reduce_cases(int rank, int world_size);

bool reduce_refused(collectives::ReduceOp op, DType dtype);
// The same for a given engine: nccl also refuses bitwise reductions (except BAND/BOR on bool).
bool reduce_refused(collectives::ReduceOp op, DType dtype, const std::string& backend);

// Rank r's input for (op, dtype): a 1-D CPU tensor of a few elements, the same length for every rank.
Tensor reduce_input(collectives::ReduceOp op, DType dtype, int r);

// The result of reducing reduce_input(op, dtype, r) over r = 0..ws-1.
Tensor reduce_expected(collectives::ReduceOp op, DType dtype, int ws);

}  // namespace braid::mp
