#include "bench/collectives/collectives_bench_check.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "tensor/factory.h"

namespace braid::bench {
namespace {

// Patterns are written and checked in chunks, so that a 64 MiB buffer never needs a float64 copy of
// itself (and its expected values) at once.
constexpr int64_t kChunk = int64_t{1} << 20;

bool splits_in_blocks(BenchOp op) {
  return op == BenchOp::Allgather || op == BenchOp::ReduceScatter || op == BenchOp::Alltoall;
}

// Element j of this rank's input.
double input_value(BenchOp op, int64_t j, int rank, int64_t block) {
  switch (op) {
    case BenchOp::Allreduce:
    case BenchOp::ReduceScatter:
      return static_cast<double>((rank + j) % 13);
    case BenchOp::Broadcast:
      return rank == 0 ? static_cast<double>(j % 61 + 1) : 0.0;
    case BenchOp::Allgather:
      return static_cast<double>((7 * rank + j) % 61);
    case BenchOp::Alltoall:
      return static_cast<double>((7 * rank + 3 * (j / block) + j % block) % 61);
  }
  return 0;
}

// Element j of this rank's output after the op, before rounding to the dtype.
double expected_value(BenchOp op, int64_t j, int rank, int ranks, int64_t block) {
  switch (op) {
    case BenchOp::Allreduce: {
      int64_t sum = 0;
      for (int s = 0; s < ranks; ++s) sum += (s + j) % 13;
      return static_cast<double>(sum);
    }
    case BenchOp::Broadcast:
      return static_cast<double>(j % 61 + 1);
    case BenchOp::Allgather:
      return static_cast<double>((7 * (j / block) + j % block) % 61);
    case BenchOp::ReduceScatter: {
      int64_t sum = 0;
      for (int s = 0; s < ranks; ++s) sum += (s + rank * block + j) % 13;
      return static_cast<double>(sum);
    }
    case BenchOp::Alltoall:
      return static_cast<double>((7 * (j / block) + 3 * rank + j % block) % 61);
  }
  return 0;
}

// Elements per rank block: the input's for allgather, the output's for reduce_scatter, a block of the
// input for alltoall; the whole buffer otherwise.
int64_t block_of(BenchOp op, const BenchBuffers& b, int ranks) {
  switch (op) {
    case BenchOp::Allgather: return b.input.numel();
    case BenchOp::ReduceScatter: return b.output.numel();
    case BenchOp::Alltoall: return b.input.numel() / ranks;
    default: return b.input.numel();
  }
}

template <class F>
void for_chunks(int64_t n, F&& f) {
  for (int64_t start = 0; start < n; start += kChunk) f(start, std::min(kChunk, n - start));
}

}  // namespace

int64_t bench_elements(BenchOp op, int64_t bytes, DType dtype, int ranks) {
  const auto elem = static_cast<int64_t>(element_size(dtype));
  const int64_t unit = splits_in_blocks(op) ? static_cast<int64_t>(ranks) : 1;
  return std::max<int64_t>(bytes / elem / unit, 1) * unit;
}

BenchBuffers make_bench_buffers(BenchOp op, int64_t elements, DType dtype, int ranks, Device device) {
  const TensorOptions opts(dtype, device);
  BenchBuffers b;
  switch (op) {
    case BenchOp::Allreduce:
    case BenchOp::Broadcast:
      b.input = braid::empty({elements}, opts);
      b.output = b.input;
      break;
    case BenchOp::Allgather:
      b.input = braid::empty({elements / ranks}, opts);
      b.output = braid::empty({elements}, opts);
      break;
    case BenchOp::ReduceScatter:
      b.input = braid::empty({elements}, opts);
      b.output = braid::empty({elements / ranks}, opts);
      break;
    case BenchOp::Alltoall:
      b.input = braid::empty({elements}, opts);
      b.output = braid::empty({elements}, opts);
      break;
  }
  return b;
}

void fill_bench_pattern(BenchOp op, const BenchBuffers& b, int rank, int ranks) {
  const int64_t block = block_of(op, b, ranks);
  for_chunks(b.input.numel(), [&](int64_t start, int64_t len) {
    std::vector<double> values(static_cast<size_t>(len));
    for (int64_t k = 0; k < len; ++k) values[static_cast<size_t>(k)] = input_value(op, start + k, rank, block);
    b.input.narrow(0, start, len).copy_(braid::from_vector(values, {len}).to(b.input.dtype()));
  });
  if (!b.output.is_same(b.input)) b.output.zero_();
}

int64_t count_wrong(BenchOp op, const BenchBuffers& b, int rank, int ranks) {
  const int64_t block = block_of(op, b, ranks);
  int64_t wrong = 0;
  for_chunks(b.output.numel(), [&](int64_t start, int64_t len) {
    std::vector<double> expected(static_cast<size_t>(len));
    for (int64_t k = 0; k < len; ++k) {
      expected[static_cast<size_t>(k)] = expected_value(op, start + k, rank, ranks, block);
    }
    // Rounded once to the dtype, as the output was.
    const auto want = braid::to_vector<double>(braid::from_vector(expected, {len}).to(b.output.dtype()));
    const auto got = braid::to_vector<double>(b.output.narrow(0, start, len).cpu());
    for (size_t k = 0; k < got.size(); ++k) wrong += got[k] != want[k] ? 1 : 0;
  });
  return wrong;
}

}  // namespace braid::bench
