// What the tests of the shared-memory staging share (collectives/shm/staging_area.h and the staged ops):
// the options of groups whose collectives go through it at every size, whatever the engine; the group
// whose counters tell which path an op took; byte messages that tell their owner.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>

#include "collectives/queue/engine_process_group.h"
#include "tensor/factory.h"
#include "tests/mp/support/mp_fixture.h"

namespace braid::mp {

inline GroupOptions staging_options(int threads = 2, int64_t max_bytes = int64_t{1} << 40) {
  GroupOptions go;
  go.threads = threads;
  go.shared_staging_max_bytes = max_bytes;
  return go;
}

// How many ops of each kind this rank ran through the shared-memory engine (its counters()).
class ShmCounts {
 public:
  explicit ShmCounts(const collectives::EngineProcessGroup& group) : group_(group) {}
  uint64_t shared_allreduces() const { return count("pool_allreduce"); }
  uint64_t shared_broadcasts() const { return count("broadcast"); }
  uint64_t staged_allreduces() const { return count("allreduce"); }
  uint64_t staged_allgathers() const { return count("allgather"); }
  uint64_t staged_alltoalls() const { return count("alltoall"); }
  uint64_t staged_reduce_scatters() const { return count("reduce_scatter"); }
  uint64_t staged_barriers() const { return count("barrier"); }

 private:
  uint64_t count(const char* path) const { return group_.engine_count("shm", path); }
  const collectives::EngineProcessGroup& group_;
};

inline ShmCounts shm_counts(const std::shared_ptr<ProcessGroup>& pg) {
  const auto* g = dynamic_cast<const collectives::EngineProcessGroup*>(pg.get());
  REQUIRE(g != nullptr);
  return ShmCounts(*g);
}

// Byte i of the message of `owner` (any small integer naming who sent it).
inline uint8_t pattern(int64_t i, int owner) {
  return static_cast<uint8_t>((i * 31 + owner * 7 + (i >> 12)) & 0xff);
}

inline Tensor message(int64_t bytes, int owner) {
  Tensor t = empty({bytes}, TensorOptions(DType::UInt8));
  for (int64_t i = 0; i < bytes; ++i) t.data<uint8_t>()[i] = pattern(i, owner);
  return t;
}

// How many bytes of `t` (uint8, any view) differ from `owner`'s message.
inline int64_t mismatches(const Tensor& t, int owner) {
  const Tensor c = t.contiguous();
  int64_t wrong = 0;
  for (int64_t i = 0; i < c.numel(); ++i) wrong += c.data<uint8_t>()[i] != pattern(i, owner);
  return wrong;
}

}  // namespace braid::mp
