// `braid trace analyze` (runtime/trace/trace_analysis.h) on dumps written here: a rank that never entered
// the stuck op (with its own dump, or named only by its peers' watchdog), a desync, a clean run, and
// missing, empty, partial and foreign files. The last case reads dumps the flight recorder itself wrote.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <fmt/format.h>

#include "base/error.h"
#include "collectives/queue/flight_recorder.h"
#include "runtime/trace/trace_analysis.h"
#include "tests/support/temp_dir.h"

namespace braid::runtime {
namespace {

using testing::TempDir;

// One dump of one rank in group "world" of `size`; `entries` are (seq, op, state).
std::string dump(int rank, int size, const std::vector<std::tuple<int, std::string, std::string>>& entries,
                 const std::string& stalls = "") {
  std::string es;
  for (const auto& [seq, op, state] : entries) {
    es += fmt::format(R"({}{{"seq":{},"op":"{}","state":"{}","in_numel":8,"out_numel":8,"dtype":"float32",)"
                      R"("scheduled_ns":1000000000,"started_ns":{},"ended_ns":0}})",
                      es.empty() ? "" : ",", seq, op, state, state == "scheduled" ? 0 : 1000000000);
  }
  return fmt::format(R"({{"format":"braid-trace","version":1,"rank":{},"pid":1,"host":"h","reason":"stall",)"
                     R"("time_ns":4000000000,"groups":[{{"name":"world","rank":{},"size":{},"backend":"gloo",)"
                     R"("capacity":2000,"stalls":[{}],"entries":[{}]}}]}})",
                     rank, rank, size, stalls, es);
}

TEST_CASE("trace analyze: names the stuck op, the ranks inside it and the rank that never entered",
          "[runtime][trace]") {
  TempDir dir("trace");
  dir.write("rank-0.json", dump(0, 3, {{4, "allreduce", "completed"}, {5, "allreduce", "started"}}));
  dir.write("rank-1.json", dump(1, 3, {{4, "allreduce", "completed"}}));
  dir.write("rank-2.json", dump(2, 3, {{4, "allreduce", "completed"}, {5, "allreduce", "started"}}));
  const TraceAnalysis a = analyze_trace_dir(dir.path().string());
  INFO(a.text);
  CHECK(a.hang);
  CHECK(a.exit_code() == 1);
  CHECK(a.problems.empty());
  CHECK_THAT(a.text, Catch::Contains("HANG in #5 allreduce (float32, 8 elements in, 8 out)"));
  CHECK_THAT(a.text, Catch::Contains("inside it, waiting: rank 0 (for 3.0 s when it dumped: stall), rank 2"));
  CHECK_THAT(a.text, Catch::Contains("NEVER ENTERED it: rank 1 (last entered: #4 allreduce completed)"));
  CHECK_THAT(a.text, Catch::Contains("=> rank 1 never entered #5 allreduce"));
}

TEST_CASE("trace analyze: a rank without a dump is placed by its peers' stall notes", "[runtime][trace]") {
  TempDir dir("trace");
  const std::string note = R"({"seq":5,"op":"allreduce","waited_s":2.0,"never_joined":[1],"behind":[],"unknown":""})";
  dir.write("rank-0.json", dump(0, 4, {{5, "allreduce", "started"}}, note));
  dir.write("rank-2.json", dump(2, 4, {{5, "allreduce", "started"}}, note));
  dir.write("rank-3.json", dump(3, 4, {{5, "allreduce", "started"}}));
  const TraceAnalysis a = analyze_trace_dir(dir.path().string());
  INFO(a.text);
  CHECK(a.hang);
  CHECK(a.exit_code() == 1);
  CHECK_THAT(a.text, Catch::Contains("NEVER ENTERED it: rank 1 (no dump; its peers' stall watchdog: published no "
                                     "progress)"));
  REQUIRE(a.problems.size() == 1);
  CHECK_THAT(a.problems[0], Catch::Contains("group 'world': no dump from rank 1"));
}

TEST_CASE("trace analyze: ranks that run different ops at one sequence number are a desync", "[runtime][trace]") {
  TempDir dir("trace");
  dir.write("rank-0.json", dump(0, 2, {{3, "allreduce", "started"}}));
  dir.write("rank-1.json", dump(1, 2, {{3, "broadcast", "started"}}));
  const TraceAnalysis a = analyze_trace_dir(dir.path().string());
  INFO(a.text);
  CHECK(a.hang);
  CHECK_THAT(a.text, Catch::Contains("DESYNC: the ranks disagree on op #3: allreduce on rank 0; broadcast on rank 1"));
}

TEST_CASE("trace analyze: every op finished is no hang", "[runtime][trace]") {
  TempDir dir("trace");
  dir.write("rank-0.json", dump(0, 2, {{1, "barrier", "completed"}, {2, "allreduce", "completed"}}));
  dir.write("rank-1.json", dump(1, 2, {{1, "barrier", "completed"}, {2, "allreduce", "completed"}}));
  const TraceAnalysis a = analyze_trace_dir(dir.path().string());
  INFO(a.text);
  CHECK(!a.hang);
  CHECK(a.exit_code() == 0);
  CHECK_THAT(a.text, Catch::Contains("no op in progress (every dumped rank reached #2)"));
}

TEST_CASE("trace analyze: missing, empty, partial and foreign dumps are named", "[runtime][trace]") {
  TempDir dir("trace");
  CHECK_THROWS_WITH(analyze_trace_dir((dir.path() / "nope").string()), Catch::Contains("is not a directory"));
  CHECK_THROWS_WITH(analyze_trace_dir(dir.path().string()), Catch::Contains("holds no dump"));

  const std::string whole = dump(0, 3, {{1, "allreduce", "completed"}});
  dir.write("rank-0.json", whole);
  dir.write("rank-1.json", whole.substr(0, whole.size() / 2));
  dir.write("rank-2.json", "");
  dir.write("rank-3.json", R"({"format":"something else"})");
  const TraceAnalysis a = analyze_trace_dir(dir.path().string());
  INFO(a.text);
  CHECK(!a.hang);
  CHECK(a.exit_code() == 2);
  CHECK(a.dumps_read == 1);
  const std::string all = fmt::format("{}", fmt::join(a.problems, "\n"));
  CHECK_THAT(all, Catch::Contains("rank-1.json: not valid JSON") && Catch::Contains("partial or corrupt"));
  CHECK_THAT(all, Catch::Contains("rank-2.json: empty file"));
  CHECK_THAT(all, Catch::Contains("rank-3.json: not a braid flight-recorder dump"));
  CHECK_THAT(all, Catch::Contains("no dump from rank 1") && Catch::Contains("no dump from rank 2"));

  dir.write("rank-3.json", R"({"format":"braid-trace","version":1,"reason":"x","time_ns":1,"groups":[{"name":"g"}]})");
  const TraceAnalysis b = analyze_trace_dir(dir.path().string());
  CHECK_THAT(fmt::format("{}", fmt::join(b.problems, "\n")), Catch::Contains("rank-3.json: groups[0]: 'rank' is missing"));
}

TEST_CASE("trace analyze: reads what the flight recorder dumps", "[runtime][trace]") {
  TempDir dir("trace");
  ::setenv("BRAID_TRACE_DIR", dir.path().c_str(), 1);
  {
    // Two ranks of one group in one process, each dumped to its own file (the dump is per process).
    auto r0 = std::make_shared<collectives::FlightRecorder>(collectives::GroupShape{0, 2, "pair"}, "gloo", 16);
    collectives::trace::register_recorder(r0);
    r0->scheduled(1, "allgather", {4, 8, DType::Float32}, Clock::now());
    r0->started(1, Clock::now());
    r0->ended(1, true);
    r0->scheduled(2, "allreduce", {4, 4, DType::Float32}, Clock::now());
    r0->started(2, Clock::now());
    const std::string p0 = collectives::trace::dump_all("test");
    REQUIRE(!p0.empty());
    std::filesystem::rename(p0, dir.path() / "rank-0.json");
    r0.reset();
    auto r1 = std::make_shared<collectives::FlightRecorder>(collectives::GroupShape{1, 2, "pair"}, "gloo", 16);
    collectives::trace::register_recorder(r1);
    r1->scheduled(1, "allgather", {4, 8, DType::Float32}, Clock::now());
    r1->started(1, Clock::now());
    r1->ended(1, true);
    const std::string p1 = collectives::trace::dump_all("test");
    REQUIRE(!p1.empty());
    if (p1 != (dir.path() / "rank-1.json").string()) std::filesystem::rename(p1, dir.path() / "rank-1.json");
  }
  ::unsetenv("BRAID_TRACE_DIR");
  const TraceAnalysis a = analyze_trace_dir(dir.path().string());
  INFO(a.text);
  CHECK(a.hang);
  CHECK_THAT(a.text, Catch::Contains("group 'pair' (2 ranks, gloo; dumps from 2 of them): HANG in #2 allreduce"));
  CHECK_THAT(a.text, Catch::Contains("NEVER ENTERED it: rank 1 (last entered: #1 allgather completed)"));
}

}  // namespace
}  // namespace braid::runtime
