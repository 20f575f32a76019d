// MemoryPool on its own, one rank over a HashStore: blocks are carved, reused by size, bounded by
// the reserve, found by offset_of; the segment name is gone from /dev/shm once the pool is set up; and the
// control slots start cleared; and a wait on a peer whose process exited ends at once (two processes, a
// fork). The multi-rank protocols are in tests/mp/collectives/shared_allreduce_test.cc and
// shared_broadcast_test.cc.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "collectives/shm/memory_pool.h"
#include "collectives/shm/peer_wait.h"
#include "store/file_store.h"
#include "store/hash_store.h"

using namespace braid;
using namespace braid::collectives;
using namespace braid::collectives::shm;

namespace {

std::shared_ptr<MemoryPool> one_rank_pool(size_t reserve) {
  store::HashStore store;
  auto pool = MemoryPool::create(store, "pool-test/", 0, 1, reserve, Millis(5000));
  REQUIRE(pool != nullptr);
  return pool;
}

bool own_segment_named() {
  const std::string mine = "braid-pool-" + std::to_string(::getpid()) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(mine, 0) == 0) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("shared-memory pool: blocks are carved, reused by size and bounded by the reserve", "[collectives][shm]") {
  auto pool = one_rank_pool(size_t{1} << 20);  // 1 MiB: the control page and 255 pages of blocks
  CHECK_FALSE(own_segment_named());
  CHECK(pool->size() == 1);

  void* a = pool->allocate(100);
  void* b = pool->allocate(100 * 1024);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  CHECK(pool->offset_of(a, 100) >= 4096);  // after the control page
  CHECK(pool->offset_of(static_cast<char*>(b) + 8, 64) == pool->offset_of(b, 1) + 8);
  int x = 0;
  CHECK(pool->offset_of(&x, sizeof(x)) == -1);                           // not in the segment
  CHECK(pool->offset_of(pool->segment(0), 8) == -1);                     // the control page
  CHECK(pool->offset_of(pool->segment(0) + (size_t{1} << 20) - 8, 8) == -1);  // not carved yet

  // Written memory reads back through the mapping.
  static_cast<char*>(b)[0] = 42;
  CHECK(pool->segment(0)[pool->offset_of(b, 1)] == 42);

  pool->deallocate(b, 100 * 1024);
  CHECK(pool->allocate(100 * 1024 - 7) == b);  // the same rounded size comes back
  CHECK(pool->allocate(size_t{2} << 20) == nullptr);  // more than the reserve

  // Fill the rest: the pool then refuses instead of overrunning.
  size_t taken = 0;
  while (pool->allocate(64 * 1024) != nullptr) taken += 64 * 1024;
  CHECK(taken > 0);
  CHECK(taken < (size_t{1} << 20));
  CHECK(pool->allocate(1) != nullptr);  // a page-sized block still fits in the pages left (60 KiB)
}

TEST_CASE("shared-memory pool: control slots start cleared", "[collectives][shm]") {
  auto pool = one_rank_pool(size_t{1} << 20);
  for (int lane = 0; lane < MemoryPool::kMaxLanes; ++lane) {
    CHECK(pool->slot(0, lane).arrived.load() == 0);
    CHECK(pool->slot(0, lane).offset == -1);
    CHECK(pool->generation(lane) == 0);
  }
}

TEST_CASE("shared-memory pool: a wait on a rank whose process exited fails at once, naming it", "[collectives][shm]") {
  const auto dir = std::filesystem::temp_directory_path() / ("braid-shm-exit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "store").string();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Rank 1: joins the pool, then exits without ever arriving in a control slot.
    int code = 1;
    try {
      store::FileStore store(path, 2, Millis(10'000));
      code = MemoryPool::create(store, "exit-test/", 1, 2, size_t{1} << 20, Millis(10'000)) ? 0 : 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  std::shared_ptr<MemoryPool> pool;
  {
    store::FileStore store(path, 2, Millis(10'000));
    pool = MemoryPool::create(store, "exit-test/", 0, 2, size_t{1} << 20, Millis(10'000));
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  std::filesystem::remove_all(dir);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(pool != nullptr);
  CHECK(pool->pid(1) == child);
  CHECK(pool->exited(1));
  CHECK_FALSE(pool->exited(0));

  OpContext ctx;
  ctx.what = "broadcast #7 on group 'g' (rank 0/2, gloo)";
  ctx.deadline = Deadline::after(Millis(30'000));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(wait_for_ranks(*pool, 0, {1, 2}, 1, 4096, ctx, "broadcast", "copy in a chunk"), CommError);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  try {
    wait_for_ranks(*pool, 0, {1, 2}, 1, 4096, ctx, "broadcast", "copy in a chunk");
  } catch (const CommError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("broadcast #7 on group 'g'") != std::string::npos);
    CHECK(message.find("rank 1 (pid " + std::to_string(child) + ") exited while the shared-memory broadcast") !=
          std::string::npos);
  }
}
