#include "collectives/shm/staging_area.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/logging.h"

namespace braid::collectives::shm {

std::unique_ptr<StagingArea> StagingArea::create(store::Store& store, const std::string& prefix, int rank,
                                                     int size, int lanes, Millis timeout) {
  lanes = std::min(lanes, MemoryPool::kMaxLanes);
  // The pool's control page, then the blocks (a multiple of the pool's 64 KiB granularity).
  static_assert(kStagingBlockBytes % (64 * 1024) == 0);
  const size_t block = kStagingBlockBytes;
  const size_t reserve = MemoryPool::kControlBytes + static_cast<size_t>(2 * lanes) * block;
  auto pool = MemoryPool::create(store, prefix, rank, size, reserve, timeout);
  if (!pool) return nullptr;
  std::vector<size_t> offsets;
  for (int i = 0; i < 2 * lanes; ++i) {
    char* p = static_cast<char*>(pool->allocate(block));
    if (p == nullptr) break;  // a full /dev/shm
    offsets.push_back(static_cast<size_t>(p - pool->segment(rank)));
  }
  // Every rank carves the same sizes from a fresh pool, so the offsets agree; whether every rank got its
  // blocks is one more verdict for all: without, every rank leaves broadcasts and allreduces to the engine.
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
  return std::unique_ptr<StagingArea>(new StagingArea(std::move(pool), lanes, std::move(offsets)));
}

StagingArea::StagingArea(std::shared_ptr<MemoryPool> pool, int lanes, std::vector<size_t> offsets)
    : pool_(std::move(pool)), lanes_(lanes), offsets_(std::move(offsets)) {}

char* StagingArea::block(int rank, int lane, int parity) const {
  return pool_->segment(rank) + offsets_[static_cast<size_t>(lane * 2 + parity)];
}

}  // namespace braid::collectives::shm
