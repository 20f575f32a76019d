#include "collectives/shm/reduce_scatter.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "collectives/shm/pool_allreduce.h"
#include "collectives/shm/peer_wait.h"

namespace braid::collectives::shm {
namespace {

constexpr int64_t kSlotAlign = 64;

// out[i] = first[i] (when `first`), else out[i] += src[i], for n bytes of T.
template <typename T>
void accumulate(char* out, const char* src, int64_t n, bool first) {
  if (first) {
    std::memcpy(out, src, static_cast<size_t>(n));
    return;
  }
  auto* o = reinterpret_cast<T*>(out);
  const auto* s = reinterpret_cast<const T*>(src);
  const int64_t count = n / static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < count; ++i) o[i] += s[i];
}

}  // namespace

bool staged_reduce_scatter_supports(DType dtype, EngineOp op) { return pool_allreduce_supports(dtype, op); }

void staged_reduce_scatter(StagingArea& staging, const Tensor& input, Tensor& output, const OpContext& ctx) {
  MemoryPool& pool = staging.pool();
  const int lane = ctx.lane;
  const int me = pool.rank();
  const int ranks = pool.size();
  const auto block = static_cast<int64_t>(output.nbytes());
  const auto bytes = static_cast<int64_t>(input.nbytes());
  BRAID_ASSERT(lane < staging.lanes() && block > 0 && bytes == block * ranks && input.is_contiguous() &&
                   output.is_contiguous() && input.dtype() == output.dtype() &&
                   staged_reduce_scatter_supports(output.dtype(), EngineOp::SUM),
               "staged reduce_scatter of {} bytes into {} on lane {}", bytes, block, lane);
  MemoryPool::ControlSlot& mine = pool.slot(me, lane);
  const auto* in = static_cast<const char*>(input.data_ptr());
  auto* out = static_cast<char*>(output.data_ptr());
  const bool is_float = output.dtype() == DType::Float32;
  const int64_t slot = static_cast<int64_t>(staging.chunk_bytes()) / ranks / kSlotAlign * kSlotAlign;
  for (int64_t done = 0; done < block; done += slot) {
    const int64_t n = std::min(slot, block - done);
    const uint64_t gen = ++pool.generation(lane);
    const int parity = static_cast<int>(gen % 2);
    char* own = staging.block(me, lane, parity);
    if (gen > 2) {
      wait_for_ranks(pool, lane, all_ranks(pool), staged_done(gen - 2), n * ranks, ctx, "reduce_scatter",
                     "finish a chunk");
    }
    *reinterpret_cast<int64_t*>(own) = bytes;
    for (int b = 0; b < ranks; ++b) {
      if (b == me) continue;  // summed straight from the input below
      std::memcpy(own + kStagingHeaderBytes + b * slot, in + b * block + done, static_cast<size_t>(n));
    }
    mine.arrived.store(staged_data_in(gen), std::memory_order_release);
    if (done == 0) {
      wait_for_ranks(pool, lane, all_ranks(pool), staged_data_in(gen), n * ranks, ctx, "reduce_scatter",
                     "copy in a chunk");
      check_staged_sizes(staging, lane, parity, gen, bytes, ctx, "reduces");
    }
    for (int r = 0; r < ranks; ++r) {
      const char* src = in + me * block + done;
      if (r != me) {
        wait_for_ranks(pool, lane, {r, r + 1}, staged_data_in(gen), n * ranks, ctx, "reduce_scatter",
                       "copy in a chunk");
        src = staging.block(r, lane, parity) + kStagingHeaderBytes + me * slot;
      }
      if (is_float) accumulate<float>(out + done, src, n, r == 0);
      else accumulate<double>(out + done, src, n, r == 0);
    }
    mine.arrived.store(staged_done(gen), std::memory_order_release);
  }
}

}  // namespace braid::collectives::shm
