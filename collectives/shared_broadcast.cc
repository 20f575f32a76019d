#include "collectives/shared_broadcast.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "base/logging.h"
#include "collectives/shared_wait.h"

namespace braid::collectives {

std::unique_ptr<SharedStaging> SharedStaging::create(store::Store& store, const std::string& prefix, int rank,
                                                     int size, int lanes, Millis timeout) {
  lanes = std::min(lanes, SharedMemoryPool::kMaxLanes);
  // The pool's control page, then the blocks (a multiple of the pool's 64 KiB granularity).
  static_assert(kStagingBlockBytes % (64 * 1024) == 0);
  const size_t block = kStagingBlockBytes;
  const size_t reserve = SharedMemoryPool::kControlBytes + static_cast<size_t>(2 * lanes) * block;
  auto pool = SharedMemoryPool::create(store, prefix, rank, size, reserve, timeout);
  if (!pool) return nullptr;
  std::vector<size_t> offsets;
  for (int i = 0; i < 2 * lanes; ++i) {
    char* p = static_cast<char*>(pool->allocate(block));
    if (p == nullptr) break;  // a full /dev/shm
    offsets.push_back(static_cast<size_t>(p - pool->segment(rank)));
  }
  // Every rank carves the same sizes from a fresh pool, so the offsets agree; whether every rank got its
  // blocks is one more verdict for all: without, every rank leaves broadcasts to the engine.
  const bool mine = offsets.size() == static_cast<size_t>(2 * lanes);
  const int64_t gen = (store.add(prefix + "blocks-generation", 1) - 1) / size;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}blocks/{}/{}", prefix, gen, r));
  store.set(keys[static_cast<size_t>(rank)], store::to_bytes(mine ? "1" : "0"));
  for (const auto& v : store.multi_get(keys, timeout)) {
    if (store::to_string(v) != "1") {
      logging::get("braid.coll")->debug("shared-memory staging not set up on rank {}: {}", rank,
                                        mine ? "another rank could not reserve its blocks" : "/dev/shm is full");
      return nullptr;
    }
  }
  return std::unique_ptr<SharedStaging>(new SharedStaging(std::move(pool), lanes, std::move(offsets)));
}

SharedStaging::SharedStaging(std::shared_ptr<SharedMemoryPool> pool, int lanes, std::vector<size_t> offsets)
    : pool_(std::move(pool)), lanes_(lanes), offsets_(std::move(offsets)) {}

char* SharedStaging::block(int rank, int lane, int parity) const {
  return pool_->segment(rank) + offsets_[static_cast<size_t>(lane * 2 + parity)];
}

void shared_broadcast(SharedStaging& staging, Tensor& buffer, int root, const OpContext& ctx) {
  SharedMemoryPool& pool = staging.pool();
  const int lane = ctx.lane;
  const int rank = pool.rank();
  const auto bytes = static_cast<int64_t>(buffer.nbytes());
  BRAID_ASSERT(lane < staging.lanes() && bytes > 0 && buffer.is_contiguous(), "shared broadcast of {} bytes on lane {}",
               bytes, lane);
  SharedMemoryPool::ControlSlot& mine = pool.slot(rank, lane);
  auto* bytes_ptr = static_cast<char*>(buffer.data_ptr());
  const auto chunk_max = static_cast<int64_t>(staging.chunk_bytes());
  for (int64_t done = 0; done < bytes; done += chunk_max) {
    const auto n = static_cast<size_t>(std::min(chunk_max, bytes - done));
    const uint64_t gen = ++pool.generation(lane);
    char* block = staging.block(root, lane, static_cast<int>(gen % 2));
    auto* header = reinterpret_cast<int64_t*>(block);
    char* data = block + kStagingHeaderBytes;
    if (rank == root) {
      if (gen > 2) wait_for_ranks(pool, lane, all_ranks(pool), gen - 2, bytes, ctx, "broadcast", "copy out a chunk");
      *header = bytes;
      std::memcpy(data, bytes_ptr + done, n);
      mine.arrived.store(gen, std::memory_order_release);
    } else {
      wait_for_ranks(pool, lane, {root, root + 1}, gen, bytes, ctx, "broadcast", "copy in a chunk");
      if (*header != bytes) {
        // Release the block for the root's later chunks, then fail: the group is broken from here on.
        mine.arrived.store(gen, std::memory_order_release);
        BRAID_THROW(CommError, "{}: invalid tensor size: the root (rank {}) broadcasts {} bytes, rank {} expects {}",
                    ctx.what, root, *header, rank, bytes);
      }
      std::memcpy(bytes_ptr + done, data, n);
      mine.arrived.store(gen, std::memory_order_release);
    }
  }
}

}  // namespace braid::collectives
