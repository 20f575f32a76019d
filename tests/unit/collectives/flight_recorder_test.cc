// FlightRecorder (collectives/queue/flight_recorder.h): the ring keeps the last N ops in order, each op's
// state follows its life, overwritten ops are not touched by late updates, capacity 0 records nothing, and
// a dump is one JSON file per process that holds every live recorder.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "collectives/queue/flight_recorder.h"
#include "tests/support/temp_dir.h"

namespace braid::collectives {
namespace {

TEST_CASE("flight recorder: the ring keeps the newest ops, oldest first", "[collectives][trace]") {
  FlightRecorder rec({1, 3, "g"}, "gloo", 4);
  for (uint64_t seq = 1; seq <= 6; ++seq) rec.scheduled(seq, "allreduce", {8, 8, DType::Float32}, Clock::now());
  const auto es = rec.entries();
  REQUIRE(es.size() == 4);
  CHECK(es.front().seq == 3);
  CHECK(es.back().seq == 6);
  for (const auto& e : es) CHECK(e.state == TraceState::Scheduled);
}

TEST_CASE("flight recorder: states follow the op; updates of overwritten ops are ignored", "[collectives][trace]") {
  FlightRecorder rec({0, 2, "g"}, "mpi", 2);
  rec.scheduled(1, "broadcast", {4, 4, DType::Int64}, Clock::now());
  rec.started(1, Clock::now());
  rec.ended(1, true);
  rec.scheduled(2, "allgather", {4, 8, DType::Float64}, Clock::now());
  rec.started(2, Clock::now());
  rec.ended(2, false);
  rec.scheduled(3, "barrier", {}, Clock::now());
  rec.started(3, Clock::now());
  rec.ended(1, false);  // op 1's slot now holds op 3
  const auto es = rec.entries();
  REQUIRE(es.size() == 2);
  CHECK(es[0].seq == 2);
  CHECK(es[0].state == TraceState::Failed);
  CHECK(es[0].io.out_numel == 8);
  CHECK(es[0].ended_ns >= es[0].started_ns);
  CHECK(es[0].started_ns >= es[0].scheduled_ns);
  CHECK(es[1].seq == 3);
  CHECK(es[1].state == TraceState::Started);
  CHECK(std::string(es[1].op) == "barrier");
}

TEST_CASE("flight recorder: capacity 0 records nothing", "[collectives][trace]") {
  FlightRecorder rec({0, 1, "g"}, "gloo", 0);
  rec.scheduled(1, "allreduce", {}, Clock::now());
  rec.started(1, Clock::now());
  rec.ended(1, true);
  CHECK(rec.entries().empty());
}

TEST_CASE("flight recorder: a dump holds every live recorder as JSON", "[collectives][trace]") {
  testing::TempDir dir("trace");
  ::setenv("BRAID_TRACE_DIR", dir.path().c_str(), 1);
  auto a = std::make_shared<FlightRecorder>(GroupShape{0, 2, "first \"quoted\""}, "gloo", 8);
  auto b = std::make_shared<FlightRecorder>(GroupShape{1, 2, "second"}, "gloo", 8);
  trace::register_recorder(a);
  trace::register_recorder(b);
  a->scheduled(1, "allreduce", {16, 16, DType::Float32}, Clock::now());
  a->started(1, Clock::now());
  b->scheduled(1, "broadcast", {2, 2, DType::Int32}, Clock::now());
  a->note_stall({1, "allreduce", 2.5, {1}, {{2, 0}}, ""});
  const std::string path = trace::dump_all("unit test");
  ::unsetenv("BRAID_TRACE_DIR");
  REQUIRE(!path.empty());
  CHECK(std::filesystem::path(path).parent_path() == dir.path());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = nlohmann::json::parse(text.str());
  CHECK(doc["format"] == "braid-trace");
  CHECK(doc["version"] == 1);
  CHECK(doc["reason"] == "unit test");
  bool saw_a = false, saw_b = false;
  for (const auto& g : doc["groups"]) {
    if (g["name"] == "first \"quoted\"") {
      saw_a = true;
      REQUIRE(g["entries"].size() == 1);
      CHECK(g["entries"][0]["state"] == "started");
      CHECK(g["entries"][0]["in_numel"] == 16);
      CHECK(g["entries"][0]["dtype"] == "float32");
      REQUIRE(g["stalls"].size() == 1);
      CHECK(g["stalls"][0]["never_joined"] == nlohmann::json::array({1}));
      CHECK(g["stalls"][0]["behind"][0]["rank"] == 2);
    }
    if (g["name"] == "second") {
      saw_b = true;
      CHECK(g["rank"] == 1);
      CHECK(g["entries"][0]["op"] == "broadcast");
    }
  }
  CHECK(saw_a);
  CHECK(saw_b);
  // A recorder that is gone is not dumped.
  b.reset();
  ::setenv("BRAID_TRACE_DIR", dir.path().c_str(), 1);
  const std::string again = trace::dump_all("again");
  ::unsetenv("BRAID_TRACE_DIR");
  std::ifstream in2(again);
  std::stringstream text2;
  text2 << in2.rdbuf();
  // Kept in a variable: a range-for over a member of a temporary reads freed memory (ASan found it).
  const nlohmann::json dumped = nlohmann::json::parse(text2.str());
  for (const auto& g : dumped["groups"]) CHECK(g["name"] != "second");
}

TEST_CASE("flight recorder: SIGUSR2 asks for a dump instead of ending the process", "[collectives][trace]") {
  // The first registered recorder installs the handler (this process has none of its own); the groups'
  // monitor threads poll the request and dump.
  trace::register_recorder(std::make_shared<FlightRecorder>(GroupShape{0, 1, "sig"}, "gloo", 4));
  (void)trace::take_signal_request();
  REQUIRE(::raise(SIGUSR2) == 0);
  CHECK(trace::take_signal_request());
  CHECK_FALSE(trace::take_signal_request());  // one request, one dump
}

TEST_CASE("flight recorder: BRAID_TRACE_BUFFER_SIZE is checked", "[collectives][trace]") {
  ::setenv("BRAID_TRACE_BUFFER_SIZE", "17", 1);
  CHECK(trace::buffer_size_from_env() == 17);
  ::setenv("BRAID_TRACE_BUFFER_SIZE", "-1", 1);
  CHECK_THROWS_WITH(trace::buffer_size_from_env(), Catch::Contains("BRAID_TRACE_BUFFER_SIZE"));
  ::setenv("BRAID_TRACE_BUFFER_SIZE", "lots", 1);
  CHECK_THROWS_WITH(trace::buffer_size_from_env(), Catch::Contains("BRAID_TRACE_BUFFER_SIZE"));
  ::unsetenv("BRAID_TRACE_BUFFER_SIZE");
  CHECK(trace::buffer_size_from_env() == 2000);
}

}  // namespace
}  // namespace braid::collectives
