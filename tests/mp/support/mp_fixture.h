// MpFixture: what every multi-process test case gets (TEST_CASE_METHOD(braid::mp::MpFixture, ...)).
//
//   * rank(), size(), backend(), device(): this process in the job, the backend under test, and the device
//     its tensors live on (CUDA for nccl, else the CPU); dev(t) moves a tensor there;
//   * store(): a PrefixStore private to this run of this test case, so keys of different test cases (and of
//     the sections of one case) never clash;
//   * shared_group(): a group of the backend over the whole job with the default options, shared by the
//     test cases that neither break a group nor need other options (creating a gloo group costs 0.1-0.2 s,
//     which over ~90 cases would dominate the run). When a test case fails on any rank, every rank drops
//     it at the end of the case and the next case gets a fresh one, so a failure cannot leave later cases
//     on a group whose ranks are out of step;
//   * make_group(options): a new process group of its own, created through collectives/registry/
//     backends.h like the shared one, so the same test runs on every engine. Each group gets its own
//     prefix of store() and a unique name. Timeouts are short (60 s by default) so that a rank that falls
//     out of step fails the test instead of hanging the run;
//   * sync(): a store barrier of all ranks (no process group involved).
//
// Ranks stay in step because Catch2 runs the test cases in one deterministic order on every rank, and
// because the fixture's destructor ends each run with a store barrier: a rank that failed early waits
// there for the others instead of racing ahead into the next test case's collectives.
//
// Test bodies should prefer CHECK to REQUIRE around collectives: a REQUIRE that stops one rank leaves the
// others waiting in the next collective until its timeout.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/registry/engine_factory.h"
#include "collectives/core/process_group.h"
#include "store/store.h"
#include "tensor/tensor.h"
#include "tests/mp/support/mp_world.h"

namespace braid::mp {

using collectives::Millis;
using collectives::ProcessGroup;
using collectives::TensorList;
using collectives::Work;

// Drops the shared group (mp_main.cc calls it after the last test case, while the store is still up).
void release_shared_group();

// The default timeout of the suite's groups: far above any op's run time here, far below CTest's limit.
inline constexpr Millis kTestGroupTimeout{60'000};

struct GroupOptions {
  int threads = 2;  // gloo lanes (torch's `threads`); the stress tests use 8
  Millis timeout = kTestGroupTimeout;
  std::vector<std::string> devices;  // gloo interfaces; empty = the backend's default ("lo")
  std::string name;                  // empty = a unique generated name
  // mpi: allreduce chunk size in bytes (BackendOptions::mpi_allreduce_chunk_bytes); unset = the default
  std::optional<int64_t> mpi_allreduce_chunk_bytes;
  // BackendOptions::shared_memory_min_bytes; unset = the default
  std::optional<int64_t> shared_memory_min_bytes;
  // BackendOptions::shared_staging_max_bytes; unset = the default
  std::optional<int64_t> shared_staging_max_bytes;
  // BackendOptions::hierarchy and hierarchy_min_bytes (two-level collectives); unset = the default
  std::optional<bool> hierarchy;
  std::optional<int64_t> hierarchy_min_bytes;
};

class MpFixture {
 public:
  MpFixture();
  ~MpFixture();
  MpFixture(const MpFixture&) = delete;
  MpFixture& operator=(const MpFixture&) = delete;

  int rank() const { return world().rank; }
  int size() const { return world().size; }
  const std::string& backend() const { return world().backend; }
  Device device() const { return device_; }
  // `t` on device() (itself when already there).
  Tensor dev(const Tensor& t) const { return t.to(device_); }

  const std::shared_ptr<store::Store>& store() const { return store_; }

  std::shared_ptr<ProcessGroup> shared_group();
  std::shared_ptr<ProcessGroup> make_group(const GroupOptions& options = {});
  // The BackendOptions make_group would use, for tests that create groups themselves.
  collectives::BackendOptions backend_options(const GroupOptions& options = {});

  // Every rank arrives before any leaves (a store barrier; `tag` must be unique within the test case).
  void sync(const std::string& tag, Millis timeout = Millis(120'000));

  // Capabilities of the backend under test that differ between engines.
  bool supports_sparse() const { return backend() != "nccl"; }
  bool supports_cpu() const { return backend() != "nccl"; }

 private:
  std::string case_prefix_;
  std::shared_ptr<store::Store> store_;
  Device device_ = Device::cpu();
  int groups_made_ = 0;
};

}  // namespace braid::mp
