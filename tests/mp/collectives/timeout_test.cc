// Timeouts and broken groups (issue 4: "no silent hang"). A rank that skips an op makes the others fail
// within the timeout with an error naming the op, its sequence number and the missing rank; the group is
// then broken and later calls throw CommError. Each case uses a fresh group with a short timeout. These
// cases run last (tests/mp/CMakeLists.txt): they leave half-finished operations behind on purpose.
#include <unistd.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <optional>
#include <cstdlib>
#include <thread>

#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

constexpr Millis kShortTimeout{1500};

// The ranks listed after "ranks that never joined it: " in an error message ("" when absent).
std::string never_joined_list(const std::string& message) {
  const std::string marker = "ranks that never joined it: ";
  const size_t at = message.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = message.find(" (engine", start);
  return message.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

bool lists_rank(const std::string& list, int rank) {
  // Entries are "R" or "R (last waited in #S)", separated by ", ".
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(", ", pos);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(pos, end - pos);
    if (entry.substr(0, entry.find(' ')) == std::to_string(rank)) return true;
    pos = end + 2;
  }
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Waits for `w` (posted at `t0`), which must fail with TimeoutError once the group's short timeout has
// passed (with slack for an oversubscribed machine), and returns the error's message.
std::string expect_op_timeout(const std::shared_ptr<Work>& w, std::chrono::steady_clock::time_point t0,
                              int skipper) {
  std::string message;
  try {
    w->wait(Millis(60'000));  // longer than the op's own deadline: we want the op's error, not wait()'s
    FAIL("the op completed although rank " << skipper << " never called it");
  } catch (const TimeoutError& e) {
    message = e.what();
  }
  const double elapsed = seconds_since(t0);
  INFO(message);
  CHECK(elapsed >= 1.0);
  CHECK(elapsed < 1.5 + 10.0);  // the timeout plus slack for an oversubscribed machine
  return message;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "timeouts: a rank that skips an allreduce is named, and the group breaks", "[timeout]") {
  if (size() < 2) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  auto pg = make_group(go);
  const int skipper = size() - 1;
  TensorList warm{dev(ints({1}))};
  finish(pg->allreduce(warm));  // every rank is connected and in step

  if (rank() != skipper) {
    TensorList xs{dev(ints({1}))};
    const auto t0 = std::chrono::steady_clock::now();
    auto w = pg->allreduce(xs);
    const uint64_t seq = pg->sequence_number();
    const std::string message = expect_op_timeout(w, t0, skipper);
    INFO(message);
    CHECK_THAT(message, Contains(fmt::format("allreduce #{}", seq)) && Contains(pg->name()));
    CHECK(lists_rank(never_joined_list(message), skipper));
    CHECK_FALSE(lists_rank(never_joined_list(message), rank()));
    CHECK(w->is_completed());
    CHECK_FALSE(w->is_success());
    // Broken: later calls are refused at once, naming the first failure.
    TensorList ys{dev(ints({1}))};
    CHECK_THROWS_AS(pg->allreduce(ys), CommError);
    CHECK_THROWS_WITH(pg->broadcast(ys), Contains("broken") && Contains(fmt::format("allreduce #{}", seq)));
  }
  sync("others-failed");
}

// On mpi an allgather of a small group is an exchange of point-to-point messages (the engine's direct
// allgather): its receives from the absent rank never complete, and the op must fail like a collective.
TEST_CASE_METHOD(MpFixture, "timeouts: a rank that skips an allgather is named, and the group breaks",
                 "[timeout][allgather]") {
  if (size() < 2) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  auto pg = make_group(go);
  const int skipper = 0;
  TensorList warm{dev(ints({1}))};
  finish(pg->allreduce(warm));

  if (rank() != skipper) {
    Tensor input = dev(full({64 * 1024}, static_cast<double>(rank())));
    Tensor output = dev(zeros({64 * 1024 * size()}));
    const auto t0 = std::chrono::steady_clock::now();
    auto w = pg->allgather_into_tensor(output, input);
    const uint64_t seq = pg->sequence_number();
    const std::string message = expect_op_timeout(w, t0, skipper);
    INFO(message);
    CHECK_THAT(message, Contains(fmt::format("allgather_into_tensor #{}", seq)) && Contains(pg->name()));
    CHECK(lists_rank(never_joined_list(message), skipper));
    CHECK_FALSE(lists_rank(never_joined_list(message), rank()));
    TensorList ys{dev(ints({1}))};
    CHECK_THROWS_WITH(pg->allreduce(ys), Contains("broken") && Contains(fmt::format("allgather_into_tensor #{}", seq)));
  }
  sync("others-failed-allgather");
}

namespace {

// Every rank but `skipper` posts an op through shared memory (`post`) that the skipper never joins: each
// must fail with a TimeoutError in time, from the shared-memory wait (of `shared_op`, the staged op that
// `op` runs), naming the op and the skipper.
void expect_shared_wait_timeout(ProcessGroup& pg, int rank, int skipper, const char* op, const char* shared_op,
                                const std::string& step, const std::function<std::shared_ptr<Work>()>& post) {
  if (rank == skipper) return;
  const auto t0 = std::chrono::steady_clock::now();
  auto w = post();
  const uint64_t seq = pg.sequence_number();
  std::string message;
  try {
    w->wait(Millis(60'000));
    FAIL("the " << op << " completed although rank " << skipper << " never called it");
  } catch (const TimeoutError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(seconds_since(t0) < 1.5 + 10.0);
  CHECK_THAT(message, Contains(fmt::format("{} #{}", op, seq)) &&
                          Contains(fmt::format("shared-memory {} waited", shared_op)) &&
                          Contains(fmt::format("rank(s) {} to {}", skipper, step)));
  CHECK(lists_rank(never_joined_list(message), skipper));
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "timeouts: a shared-memory allreduce names the rank that never entered it",
                 "[timeout][shared]") {
  if (size() < 2 || !supports_cpu()) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  go.shared_memory_min_bytes = 0;
  auto pg = make_group(go);
  Tensor x = pg->empty_shared({1024}, DType::Float32);
  x.fill_(1.0);
  TensorList warm{x};
  finish(pg->allreduce(warm));  // every rank has its pool and is in step
  TensorList xs{x};
  expect_shared_wait_timeout(*pg, rank(), size() - 1, "allreduce", "allreduce", "enter it",
                             [&] { return pg->allreduce(xs); });
  sync("others-failed");
}

TEST_CASE_METHOD(MpFixture, "timeouts: a shared-memory broadcast names the root that never published",
                 "[timeout][shared][broadcast]") {
  if (size() < 2 || !supports_cpu()) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  go.shared_staging_max_bytes = 1 << 20;
  auto pg = make_group(go);
  TensorList warm{ints({1, 2, 3})};
  finish(pg->broadcast(warm));  // every rank has its staging and is in step
  TensorList xs{ints({rank()})};
  collectives::BroadcastOptions o;
  o.root_rank = size() - 1;
  expect_shared_wait_timeout(*pg, rank(), size() - 1, "broadcast", "broadcast", "copy in a chunk",
                             [&] { return pg->broadcast(xs, o); });
  sync("others-failed");
}

TEST_CASE_METHOD(MpFixture, "timeouts: a staged allreduce names the rank that never entered it",
                 "[timeout][shared][allreduce]") {
  if (size() < 2 || !supports_cpu()) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  go.shared_staging_max_bytes = 1 << 20;
  auto pg = make_group(go);
  TensorList warm{floats({1, 2, 3})};
  finish(pg->allreduce(warm));  // every rank has its staging and is in step
  TensorList xs{floats({1})};
  expect_shared_wait_timeout(*pg, rank(), 0, "allreduce", "allreduce", "copy in a chunk",
                             [&] { return pg->allreduce(xs); });
  sync("others-failed");
}

TEST_CASE_METHOD(MpFixture, "timeouts: staged allgather, alltoall, reduce_scatter and barrier name the rank that never came",
                 "[timeout][shared][allgather][alltoall][reduce_scatter][barrier]") {
  if (size() < 2 || !supports_cpu()) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  go.shared_staging_max_bytes = 1 << 20;
  {
    auto pg = make_group(go);
    Tensor in = floats({1});
    Tensor out = floats(std::vector<double>(static_cast<size_t>(size()), 0.0));
    finish(pg->allgather_into_tensor(out, in));  // every rank has its staging and is in step
    expect_shared_wait_timeout(*pg, rank(), 0, "allgather_into_tensor", "allgather", "copy in a chunk",
                               [&] { return pg->allgather_into_tensor(out, in); });
  }
  sync("allgather-others-failed");
  {
    auto pg = make_group(go);
    Tensor in = floats(std::vector<double>(static_cast<size_t>(size()), 1.0));
    Tensor out = floats(std::vector<double>(static_cast<size_t>(size()), 0.0));
    finish(pg->alltoall_single(out, in, {}, {}));
    expect_shared_wait_timeout(*pg, rank(), size() - 1, "alltoall_single", "alltoall", "copy in a chunk",
                               [&] { return pg->alltoall_single(out, in, {}, {}); });
  }
  sync("alltoall-others-failed");
  {
    auto pg = make_group(go);
    Tensor in = floats(std::vector<double>(static_cast<size_t>(size()), 1.0));
    Tensor out = floats({0.0});
    finish(pg->reduce_scatter_tensor(out, in));
    expect_shared_wait_timeout(*pg, rank(), 0, "reduce_scatter_tensor", "reduce_scatter", "copy in a chunk",
                               [&] { return pg->reduce_scatter_tensor(out, in); });
  }
  sync("reduce-scatter-others-failed");
  {
    auto pg = make_group(go);
    finish(pg->barrier());
    expect_shared_wait_timeout(*pg, rank(), size() - 1, "barrier", "barrier", "enter it",
                               [&] { return pg->barrier(); });
  }
  sync("barrier-others-failed");
}

TEST_CASE_METHOD(MpFixture, "timeouts: a rank that never sets up the shared-memory pool is named, and nothing "
                 "is left in /dev/shm", "[timeout][shared]") {
  if (size() < 2 || !supports_cpu()) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  auto pg = make_group(go);
  const int skipper = size() - 1;
  if (rank() != skipper) {
    // The first empty_shared is collective: the store exchange of segment names waits for the skipper.
    CHECK_THROWS_WITH(pg->empty_shared({1024}, DType::Float32),
                      Contains("timed out") && Contains(fmt::format("shm/0/segment/{}", skipper)));
    // The segment this rank created is unmapped and unlinked again.
    const std::string mine = fmt::format("braid-pool-{}-", ::getpid());
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      CHECK(entry.path().filename().string().rfind(mine, 0) != 0);
    }
  }
  sync("others-failed");
}

TEST_CASE_METHOD(MpFixture, "timeouts: Work::wait() with no limit surfaces the op's own error", "[timeout][work]") {
  // What a user sees who just calls wait(): the op's enriched error (op, sequence number, the rank that
  // never joined), not a bare "timed out waiting for completion" from the wait itself.
  if (size() < 2) return;
  GroupOptions go;
  go.timeout = kShortTimeout;
  auto pg = make_group(go);
  const int skipper = 0;
  TensorList warm{dev(ints({1}))};
  finish(pg->allreduce(warm));
  if (rank() != skipper) {
    TensorList xs{dev(ints({1}))};
    auto w = pg->allreduce(xs);
    std::string message;
    try {
      w->wait();
      FAIL("the allreduce completed although rank " << skipper << " never called it");
    } catch (const TimeoutError& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(lists_rank(never_joined_list(message), skipper));
  }
  sync("others-failed");
}

TEST_CASE_METHOD(MpFixture, "timeouts: a per-call timeout overrides the group's", "[timeout]") {
  if (size() < 2) return;
  auto pg = make_group();  // 60 s
  const int skipper = 0;
  TensorList warm{dev(ints({1}))};
  finish(pg->allreduce(warm));
  if (rank() != skipper) {
    TensorList xs{dev(ints({1}))};
    BroadcastOptions o;
    o.root_rank = skipper;
    o.timeout = Millis(1000);
    const auto t0 = std::chrono::steady_clock::now();
    auto w = pg->broadcast(xs, o);
    CHECK_THROWS_AS(w->wait(Millis(60'000)), TimeoutError);
    const double elapsed = seconds_since(t0);
    CHECK(elapsed < 1.0 + 10.0);
    CHECK_THROWS_WITH(w->wait(Millis(0)), Contains("broadcast #") && Contains("timed out"));
  }
  sync("others-failed");
}

// gloo runs small reduce_scatters on registered buffers, whose waits know only their connection's timeout;
// the engine's watchdog must end them at the op's own deadline. Both the first such op (which connects
// the exchange) and a later one (blocked in the exchange's wait) must fail in time.
TEST_CASE_METHOD(MpFixture, "timeouts: a small reduce_scatter with an absent rank fails at its own deadline",
                 "[timeout][reduce_scatter]") {
  if (size() < 2) return;
  const int skipper = size() - 1;
  const int64_t chunk = 256;
  auto call = [&](const std::shared_ptr<ProcessGroup>& pg, std::optional<Millis> timeout) {
    Tensor in = dev(full({chunk * size()}, 1.0));
    Tensor out = dev(zeros({chunk}));
    collectives::ReduceScatterOptions o;
    o.timeout = timeout;
    return pg->reduce_scatter_tensor(out, in, o);
  };
  SECTION("the first one, with the group's timeout") {
    GroupOptions go;
    go.timeout = kShortTimeout;
    auto pg = make_group(go);
    TensorList warm{dev(ints({1}))};
    finish(pg->allreduce(warm));
    if (rank() != skipper) {
      const auto t0 = std::chrono::steady_clock::now();
      auto w = call(pg, std::nullopt);
      const uint64_t seq = pg->sequence_number();
      const std::string message = expect_op_timeout(w, t0, skipper);
      CHECK_THAT(message, Contains(fmt::format("reduce_scatter_tensor #{}", seq)));
      CHECK(lists_rank(never_joined_list(message), skipper));
    }
    sync("others-failed-first-reduce-scatter");
  }
  SECTION("a later one, with a per-call timeout shorter than the group's") {
    auto pg = make_group();  // 60 s
    // Every lane's exchange is connected (op n runs on lane n % lanes; gloo's default is 2 lanes).
    for (int i = 0; i < 4; ++i) finish(call(pg, std::nullopt));
    if (rank() != skipper) {
      const auto t0 = std::chrono::steady_clock::now();
      auto w = call(pg, Millis(1000));
      CHECK_THROWS_AS(w->wait(Millis(60'000)), TimeoutError);
      const double elapsed = seconds_since(t0);
      CHECK(elapsed >= 0.9);
      CHECK(elapsed < 1.0 + 10.0);
      CHECK_THROWS_WITH(w->wait(Millis(0)), Contains("reduce_scatter_tensor #") && Contains("timed out") &&
                                                !Contains("connecting"));
    }
    sync("others-failed-later-reduce-scatter");
  }
}

TEST_CASE_METHOD(MpFixture, "timeouts: Work::wait's own limit does not fail the op", "[timeout][work]") {
  auto pg = make_group();
  TensorList warm{dev(ints({1}))};
  finish(pg->allreduce(warm));
  // Rank 0 joins 1.5 s late; the others' short waits run out, but the op completes once rank 0 arrives.
  if (rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  TensorList xs{dev(ints({rank() + 1}))};
  auto w = pg->allreduce(xs);
  if (rank() != 0 && size() > 1) {
    CHECK_THROWS_AS(w->wait(Millis(200)), TimeoutError);
    CHECK_FALSE(w->is_completed());
  }
  w->wait();
  CHECK(w->is_success());
  CHECK_THAT(xs[0], Equals(ints({int64_t{size()} * (size() + 1) / 2})));
  // And the group is not broken.
  finish(pg->allreduce(xs));
}

TEST_CASE_METHOD(MpFixture, "timeouts: monitored_barrier passes with every rank and names an absent one", "[timeout][barrier]") {
  auto pg = make_group();
  pg->monitored_barrier(Millis(30'000));
  if (size() < 2) return;
  const int absent = size() - 1;
  if (rank() != absent) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      pg->monitored_barrier(Millis(1000));
      FAIL("monitored_barrier passed although rank " << absent << " never called it");
    } catch (const Error& e) {
      INFO(e.what());
      if (rank() == 0) CHECK_THAT(std::string(e.what()), Contains(fmt::format("Rank {} failed to pass monitoredBarrier", absent)));
      CHECK(seconds_since(t0) < 1.0 + 10.0);
    }
  }
  sync("barrier-failed");
  // A monitored barrier is store-based: the group itself still works.
  TensorList xs{dev(ints({1}))};
  finish(pg->allreduce(xs));
  CHECK_THAT(xs[0], Equals(ints({size()})));
}

TEST_CASE_METHOD(MpFixture, "BRAID_DEBUG=DETAIL: ranks that call a collective differently are named", "[timeout][detail]") {
  // The mode is read when a group is made; the environment is restored before anything else runs.
  ::setenv("BRAID_DEBUG", "DETAIL", 1);
  std::shared_ptr<ProcessGroup> pg;
  try {
    pg = make_group();
  } catch (...) {
    ::unsetenv("BRAID_DEBUG");
    throw;
  }
  ::unsetenv("BRAID_DEBUG");
  // Matching calls pass the fingerprint check.
  TensorList ok{dev(ints({1, 2}))};
  finish(pg->allreduce(ok));
  CHECK_THAT(ok[0], Equals(ints({size(), 2 * size()})));
  if (size() < 2) return;
  // The last rank passes a different shape: every rank fails, and rank 0 names the last rank.
  const int odd = size() - 1;
  TensorList xs{dev(rank() == odd ? zeros({3}) : zeros({2}))};
  auto w = pg->allreduce(xs);
  std::string message;
  try {
    w->wait(Millis(60'000));
    FAIL("allreduce with mismatched shapes passed under BRAID_DEBUG=DETAIL");
  } catch (const Error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK_THAT(message, Contains("BRAID_DEBUG=DETAIL"));
  if (rank() == 0) CHECK_THAT(message, Contains(fmt::format("rank {}:", odd)));
  if (rank() == odd) CHECK_THAT(message, Contains("rank 0:"));
}
