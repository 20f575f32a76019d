#define CATCH_CONFIG_EXTERNAL_INTERFACES  // the listener base class below
#include "tests/mp/support/mp_fixture.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "base/check.h"
#include "store/prefix_store.h"

namespace braid::mp {

namespace {

// How long the end-of-case barrier waits for the slowest rank: above the groups' 60 s timeout, so a rank
// stuck in a collective whose peer gave up still arrives, and below CTest's 300 s limit.
constexpr Millis kEndOfCaseTimeout{150'000};

uint32_t fnv1a32(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

// "<hash of the test case name>-<run>": the same on every rank for the same run of the same case, whatever
// happened in earlier cases (a counter over all cases would drift if ranks ever ran different sections).
std::string next_case_id() {
  static std::map<std::string, int> runs;
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  const int run = runs[name]++;
  return fmt::format("{:08x}-{}", fnv1a32(name), run);
}

// Whether an assertion failed (or an exception escaped) in the running test case on this rank.
bool g_case_failed = false;

class FailureListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    g_case_failed = false;
  }
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) g_case_failed = true;
    return TestEventListenerBase::assertionEnded(stats);
  }
};

struct Shared {
  std::shared_ptr<ProcessGroup> group;
  int generation = 0;  // the same on every rank: groups are replaced only by a collective decision
};

Shared& shared() {
  static Shared s;
  return s;
}

}  // namespace

CATCH_REGISTER_LISTENER(FailureListener)

void release_shared_group() { shared().group.reset(); }

MpFixture::MpFixture() : case_prefix_("mp/" + next_case_id()) {
  const World& w = world();
  BRAID_CHECK_ARG(w.store != nullptr, "MpFixture: init_world() was not called (link tests/mp/support/mp_main.cc)");
  store_ = std::make_shared<store::PrefixStore>(case_prefix_, w.store);
  if (w.backend == "nccl") device_ = Device::cuda(w.local_rank);
}

MpFixture::~MpFixture() {
  try {
    // Count the ranks on which this case failed; when any did, nobody keeps the shared group.
    store_->add("failed-ranks", g_case_failed ? 1 : 0);
    sync("end-of-case", kEndOfCaseTimeout);
    if (store_->add("failed-ranks", 0) > 0 && shared().group) {
      shared().group.reset();
      shared().generation++;
    }
  } catch (const std::exception& e) {
    // The ranks can no longer be brought back in step; going on would only produce confusing failures
    // in every later case, so end this rank (the launcher then stops the others).
    std::fprintf(stderr, "rank %d: the ranks fell out of step at the end of test case '%s' (%s); exiting\n",
                 world().rank, Catch::getResultCapture().getCurrentTestName().c_str(), e.what());
    std::fflush(stderr);
    std::_Exit(70);
  }
}

collectives::BackendOptions MpFixture::backend_options(const GroupOptions& options) {
  const int k = groups_made_++;
  collectives::BackendOptions o;
  o.rank = rank();
  o.size = size();
  o.group_name = options.name.empty() ? fmt::format("{}/g{}", case_prefix_.substr(3), k) : options.name;
  o.store = std::make_shared<store::PrefixStore>(fmt::format("g{}", k), store_);
  o.timeout = options.timeout;
  o.threads = options.threads;
  o.devices = options.devices;
  o.mpi_allreduce_chunk_bytes = options.mpi_allreduce_chunk_bytes;
  o.shared_memory_min_bytes = options.shared_memory_min_bytes;
  o.shared_staging_max_bytes = options.shared_staging_max_bytes;
  o.hierarchy = options.hierarchy;
  o.hierarchy_min_bytes = options.hierarchy_min_bytes;
  return o;
}

std::shared_ptr<ProcessGroup> MpFixture::shared_group() {
  Shared& s = shared();
  if (!s.group) {
    collectives::BackendOptions o;
    o.rank = rank();
    o.size = size();
    o.group_name = fmt::format("shared-{}", s.generation);
    o.store = std::make_shared<store::PrefixStore>(fmt::format("mp/shared-{}", s.generation), world().store);
    o.timeout = kTestGroupTimeout;
    s.group = collectives::create_process_group(backend(), o);
  }
  return s.group;
}

std::shared_ptr<ProcessGroup> MpFixture::make_group(const GroupOptions& options) {
  return collectives::create_process_group(backend(), backend_options(options));
}

void MpFixture::sync(const std::string& tag, Millis timeout) {
  const std::string key = "sync/" + tag;
  if (store_->add(key, 1) == size()) store_->set(key + "/go", std::string_view("1"));
  store_->wait({key + "/go"}, timeout);
}

}  // namespace braid::mp
