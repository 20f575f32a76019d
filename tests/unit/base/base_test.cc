// base: environment parsers, check macros, the error hierarchy, deadlines and logging.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/check.h"
#include "base/deadline.h"
#include "base/env.h"
#include "base/error.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "base/quiet_timeouts.h"

namespace braid {
namespace {

using namespace std::chrono_literals;

// Captures what is written to file descriptor 2 (where braid's log sink writes) until finish().
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    char path[] = "/tmp/braid_stderr_XXXXXX";
    fd_ = ::mkstemp(path);
    REQUIRE(fd_ >= 0);
    path_ = path;
    saved_ = ::dup(2);
    ::dup2(fd_, 2);
  }
  ~StderrCapture() { finish(); }
  std::string finish() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      ::close(fd_);
      saved_ = -1;
      std::ifstream in(path_);
      std::stringstream ss;
      ss << in.rdbuf();
      text_ = ss.str();
      ::unlink(path_.c_str());
    }
    return text_;
  }

 private:
  int fd_ = -1;
  int saved_ = -1;
  std::string path_;
  std::string text_;
};

// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception>";
}

}  // namespace

TEST_CASE("env: parse_int", "[base][env]") {
  CHECK(env::parse_int("42", "X") == 42);
  CHECK(env::parse_int(" -7 ", "X") == -7);
  CHECK(env::parse_int("9223372036854775807", "X") == INT64_MAX);
  CHECK_THROWS_AS(env::parse_int("abc", "X"), InvalidArgument);
  CHECK_THROWS_WITH(env::parse_int("abc", "BRAID_RANK"), "BRAID_RANK: expected an integer, got 'abc'");
  CHECK_THROWS_WITH(env::parse_int("12x", "--port"), Catch::Contains("--port") && Catch::Contains("'12x'"));
  CHECK_THROWS_WITH(env::parse_int("", "X"), Catch::Contains("expected an integer, got ''"));
  CHECK_THROWS_WITH(env::parse_int("1.5", "X"), Catch::Contains("expected an integer"));
  CHECK_THROWS_WITH(env::parse_int("99999999999999999999", "BRAID_N"),
                    Catch::Contains("BRAID_N: integer '99999999999999999999' is out of range"));
}

TEST_CASE("env: parse_bool", "[base][env]") {
  for (const char* t : {"1", "true", "TRUE", "yes", "On", " on "}) CHECK(env::parse_bool(t, "X"));
  for (const char* f : {"0", "false", "No", "off", "OFF"}) CHECK_FALSE(env::parse_bool(f, "X"));
  CHECK_THROWS_WITH(env::parse_bool("maybe", "BRAID_FLAG"),
                    Catch::Contains("BRAID_FLAG: expected a boolean") && Catch::Contains("'maybe'"));
  CHECK_THROWS_AS(env::parse_bool("", "X"), InvalidArgument);
  CHECK_THROWS_AS(env::parse_bool("2", "X"), InvalidArgument);
}

TEST_CASE("env: parse_duration", "[base][env]") {
  CHECK(env::parse_duration("30s", "X") == 30s);
  CHECK(env::parse_duration("500ms", "X") == 500ms);
  CHECK(env::parse_duration("2m", "X") == 2min);
  CHECK(env::parse_duration("2min", "X") == 2min);
  CHECK(env::parse_duration("1h", "X") == 1h);
  CHECK(env::parse_duration("250", "X") == 250ms);  // plain numbers are milliseconds
  CHECK(env::parse_duration(" 5 S ", "X") == 5s);
  CHECK(env::parse_duration("0s", "X") == 0ms);
  CHECK_THROWS_WITH(env::parse_duration("5d", "BRAID_TIMEOUT"),
                    Catch::Contains("BRAID_TIMEOUT: unknown duration unit 'd' in '5d'"));
  CHECK_THROWS_WITH(env::parse_duration("-1s", "BRAID_TIMEOUT"),
                    Catch::Contains("BRAID_TIMEOUT: duration must not be negative"));
  CHECK_THROWS_WITH(env::parse_duration("s", "BRAID_TIMEOUT"),
                    Catch::Contains("BRAID_TIMEOUT: expected a duration such as 500ms, 30s or 2m, got 's'"));
  CHECK_THROWS_AS(env::parse_duration("", "X"), InvalidArgument);
}

TEST_CASE("env: every duration is bounded by kMaxDuration (30 days)", "[base][env]") {
  CHECK(env::parse_duration("720h", "X") == 720h);  // exactly 30 days
  CHECK(env::parse_duration("2592000s", "X") == 2592000s);
  CHECK_THROWS_WITH(env::parse_duration("721h", "BRAID_TIMEOUT"),
                    Catch::Contains("BRAID_TIMEOUT: duration '721h' is longer than the limit of 2592000 s (30 days)"));
  // Counts that would wrap around int64 milliseconds when multiplied out, into a small or negative value.
  CHECK_THROWS_AS(env::parse_duration("9223372036854775h", "X"), InvalidArgument);
  CHECK_THROWS_AS(env::parse_duration("9223372036854775807ms", "X"), InvalidArgument);

  CHECK(env::checked_seconds(1.5, "x") == 1500ms);
  CHECK(env::checked_seconds(2592000, "x") == std::chrono::milliseconds(env::kMaxDuration));
  CHECK(env::checked_seconds(0, "x", /*allow_zero=*/true) == 0ms);
  for (double bad : {1e10, 2592000.5, -1.0, 0.0, 0.0004, std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    INFO(bad);
    CHECK_THROWS_WITH(env::checked_seconds(bad, "failure.timeout_s"),
                      Catch::StartsWith("failure.timeout_s: must be a duration in seconds"));
  }
  CHECK_THAT(env::seconds_range_error(1e10), Catch::Contains("> 0 and at most 2592000 (30 days), got "));
  CHECK(env::seconds_range_error(60).empty());
}

TEST_CASE("env: parse_size", "[base][env]") {
  CHECK(env::parse_size("4096", "X") == 4096);
  CHECK(env::parse_size("25M", "X") == int64_t{25} << 20);
  CHECK(env::parse_size("64K", "X") == int64_t{64} << 10);
  CHECK(env::parse_size("64kb", "X") == int64_t{64} << 10);
  CHECK(env::parse_size("3KiB", "X") == int64_t{3} << 10);
  CHECK(env::parse_size("1G", "X") == int64_t{1} << 30);
  CHECK(env::parse_size("2GB", "X") == int64_t{2} << 30);
  CHECK(env::parse_size("7b", "X") == 7);
  CHECK_THROWS_WITH(env::parse_size("10x", "BRAID_BUCKET"),
                    Catch::Contains("BRAID_BUCKET: unknown size unit 'x' in '10x'"));
  CHECK_THROWS_WITH(env::parse_size("-5M", "BRAID_BUCKET"), Catch::Contains("size must not be negative"));
  CHECK_THROWS_WITH(env::parse_size("99999999999G", "BRAID_BUCKET"), Catch::Contains("is too large"));
  CHECK_THROWS_WITH(env::parse_size("M", "BRAID_BUCKET"), Catch::Contains("expected a size"));
}

TEST_CASE("env: getters read the environment and name the variable in errors", "[base][env]") {
  ::unsetenv("BRAID_TEST_UNSET_VAR");
  CHECK_FALSE(env::get("BRAID_TEST_UNSET_VAR").has_value());
  CHECK(env::get_int("BRAID_TEST_UNSET_VAR", 5) == 5);
  CHECK(env::get_bool("BRAID_TEST_UNSET_VAR", true));
  CHECK(env::get_duration("BRAID_TEST_UNSET_VAR", 7ms) == 7ms);
  CHECK_THROWS_WITH(env::require("BRAID_TEST_UNSET_VAR", "the test's purpose"),
                    "environment variable BRAID_TEST_UNSET_VAR is not set (the test's purpose)");
  CHECK_THROWS_WITH(env::require_int("BRAID_TEST_UNSET_VAR", "rank"), Catch::Contains("BRAID_TEST_UNSET_VAR"));
  {
    ScopedEnv e("BRAID_TEST_VAR", "17");
    CHECK(env::get("BRAID_TEST_VAR") == "17");
    CHECK(env::get_int("BRAID_TEST_VAR", 0) == 17);
    CHECK(env::require_int("BRAID_TEST_VAR", "x") == 17);
    CHECK(env::get_duration("BRAID_TEST_VAR", 0ms) == 17ms);
    CHECK_THROWS_WITH(env::get_bool("BRAID_TEST_VAR", false), Catch::StartsWith("BRAID_TEST_VAR: expected a boolean"));
  }
  {
    ScopedEnv e("BRAID_TEST_VAR", "junk");
    CHECK_THROWS_WITH(env::get_int("BRAID_TEST_VAR", 0), "BRAID_TEST_VAR: expected an integer, got 'junk'");
    CHECK_THROWS_WITH(env::get_duration("BRAID_TEST_VAR", 0ms), Catch::StartsWith("BRAID_TEST_VAR: "));
  }
  {
    ScopedEnv e("BRAID_TEST_VAR", "");  // an empty value counts as set
    CHECK(env::get("BRAID_TEST_VAR") == "");
    CHECK_THROWS_WITH(env::get_int("BRAID_TEST_VAR", 3), Catch::Contains("BRAID_TEST_VAR"));
  }
}

TEST_CASE("check macros: messages carry both values", "[base][check]") {
  const int a = 2, b = 3;
  CHECK_THROWS_AS([&] { BRAID_CHECK_EQ(a, b, "ranks differ"); }(), InvalidArgument);
  CHECK(message_of([&] { BRAID_CHECK_EQ(a, b, "ranks differ for {}", "allreduce"); }) ==
        "ranks differ for allreduce (expected a == b, got 2 vs 3)");
  CHECK(message_of([&] { BRAID_CHECK_LT(b, a, "order"); }) == "order (expected b < a, got 3 vs 2)");
  CHECK(message_of([&] { BRAID_CHECK_GE(a, b, "ge"); }) == "ge (expected a >= b, got 2 vs 3)");
  CHECK(message_of([&] { BRAID_CHECK_LE(b, a, "le"); }) == "le (expected b <= a, got 3 vs 2)");
  CHECK(message_of([&] { BRAID_CHECK_NE(a, 2, "ne"); }) == "ne (expected a != 2, got 2 vs 2)");
  CHECK(message_of([&] { BRAID_CHECK_EQ(std::string("x"), std::string("y"), "names"); }) ==
        "names (expected std::string(\"x\") == std::string(\"y\"), got x vs y)");
  CHECK_NOTHROW([&] { BRAID_CHECK_EQ(a, 2, "fine"); }());
  // Each operand is evaluated once.
  int calls = 0;
  auto next = [&] { return ++calls; };
  CHECK_NOTHROW([&] { BRAID_CHECK_EQ(next(), 1, "once"); }());
  CHECK(calls == 1);
  CHECK(message_of([&] { BRAID_CHECK_ARG(a > b, "a must exceed b: {} <= {}", a, b); }) == "a must exceed b: 2 <= 3");
  CHECK_THROWS_AS([] { BRAID_CHECK_ARG(false, "x"); }(), InvalidArgument);
  // BRAID_ASSERT is an internal error and keeps the location; BRAID_THROW picks the type.
  const std::string assert_msg = message_of([&] { BRAID_ASSERT(a == b, "lost {}", "state"); });
  CHECK_THAT(assert_msg, Catch::StartsWith("internal assertion 'a == b' failed: lost state [") &&
                             Catch::Contains("base_test.cc:"));
  CHECK_THROWS_AS([] { BRAID_ASSERT(false, "x"); }(), InternalError);
  CHECK_THROWS_AS([] { BRAID_THROW(TimeoutError, "waited {} ms", 5); }(), TimeoutError);
  CHECK(message_of([] { BRAID_THROW(CommError, "peer {} closed", 3); }) == "peer 3 closed");
}

TEST_CASE("errors: hierarchy and RemoteError", "[base][error]") {
  CHECK_THROWS_AS(throw InvalidArgument("x"), Error);
  CHECK_THROWS_AS(throw TimeoutError("x"), Error);
  CHECK_THROWS_AS(throw CommError("x"), Error);
  CHECK_THROWS_AS(throw InternalError("x"), Error);
  CHECK_THROWS_AS(throw RemoteError("w", "m"), Error);
  CHECK_THROWS_AS(throw InvalidArgument("x"), std::runtime_error);
  const RemoteError e("trainer3", "ValueError: bad shape");
  CHECK(e.worker() == "trainer3");
  CHECK(e.remote_message() == "ValueError: bad shape");
  CHECK(std::string(e.what()) == "error on remote worker 'trainer3': ValueError: bad shape");
  try {
    throw RemoteError("ps0", "boom");
  } catch (const Error& err) {
    const auto* remote = dynamic_cast<const RemoteError*>(&err);
    REQUIRE(remote != nullptr);
    CHECK(remote->worker() == "ps0");
  }
}

TEST_CASE("deadline", "[base][deadline]") {
  CHECK(Deadline::after(0ms).expired());
  CHECK(Deadline::after(-5ms).expired());
  CHECK(Deadline::after(-5ms).remaining() == 0ms);
  const Deadline d = Deadline::after(1h);
  CHECK_FALSE(d.expired());
  CHECK_FALSE(d.is_never());
  CHECK(d.remaining() <= 1h);
  CHECK(d.remaining() > 59min);
  const Deadline n = Deadline::never();
  CHECK(n.is_never());
  CHECK_FALSE(n.expired());
  CHECK(n.remaining() == Millis::max());
  const Deadline soon = Deadline::after(20ms);
  std::this_thread::sleep_for(30ms);
  CHECK(soon.expired());
  CHECK(soon.remaining() == 0ms);
  // At a given time: exact, and never negative.
  const auto t0 = Clock::now();
  const Deadline at(t0 + 250ms);
  CHECK(at.remaining(t0) == 250ms);
  CHECK(at.remaining(t0 + 100ms) == 150ms);
  CHECK(at.remaining(t0 + 1s) == 0ms);
  CHECK(n.remaining(t0) == Millis::max());
  const auto start = Clock::now();
  std::this_thread::sleep_for(5ms);
  CHECK(elapsed_ms(start) >= 5.0);
}

TEST_CASE("log: set_levels applies specs and rejects bad ones without changing anything", "[base][log]") {
  logging::set_levels("info");
  auto a = logging::get("braid.test_a");
  auto b = logging::get("braid.test_b");
  CHECK(logging::get("braid.test_a") == a);  // one logger per name
  logging::set_levels("warn,braid.test_b=debug");
  CHECK(a->level() == spdlog::level::warn);
  CHECK(b->level() == spdlog::level::debug);
  CHECK(logging::get("braid.test_new")->level() == spdlog::level::warn);  // later loggers get the default
  CHECK_THROWS_WITH(logging::set_levels("verbose"), Catch::Contains("unknown level 'verbose'"));
  CHECK_THROWS_WITH(logging::set_levels("error,braid.test_a=loud"), Catch::Contains("unknown level 'loud'"));
  CHECK_THROWS_WITH(logging::set_levels("=debug"), Catch::Contains("no logger name before '='"));
  // Nothing changed: neither the default nor the valid entries before the bad one.
  CHECK(a->level() == spdlog::level::warn);
  CHECK(b->level() == spdlog::level::debug);
  CHECK(logging::get("braid.test_newer")->level() == spdlog::level::warn);
  logging::set_levels("off");
  CHECK(a->level() == spdlog::level::off);
  logging::set_levels("info,braid.test_b=info");
  CHECK(b->level() == spdlog::level::info);
}

TEST_CASE("log: identity appears in every line; backtrace keeps debug lines", "[base][log]") {
  logging::set_levels("info");
  auto logger = logging::get("braid.test_id");
  if (logging::identity().empty()) {
    StderrCapture cap;
    logger->info("before identity");
    logger->flush();
    const std::string out = cap.finish();
    CHECK_THAT(out, Catch::Contains("[braid.test_id]") && Catch::Contains("before identity") &&
                        Catch::Contains("[pid " + std::to_string(::getpid()) + "]"));
  }
  logging::set_identity(3, 8, "trainer");
  CHECK(logging::identity() == "rank 3/8 trainer");
  {
    StderrCapture cap;
    logger->info("hello {}", 42);
    logging::get("braid.test_other")->warn("second logger");
    logger->flush();
    logging::get("braid.test_other")->flush();
    const std::string out = cap.finish();
    CHECK_THAT(out, Catch::Contains("[braid.test_id]") && Catch::Contains("[rank 3/8 trainer] hello 42"));
    CHECK_THAT(out, Catch::Contains("[braid.test_other]") && Catch::Contains("[rank 3/8 trainer] second logger"));
  }
  logging::set_identity(0, 1, "");
  CHECK(logging::identity() == "rank 0/1");
  {
    StderrCapture cap;
    logger->debug("hidden detail {}", 7);  // below the level: not printed, but kept for the backtrace
    logger->flush();
    CHECK_THAT(cap.finish(), !Catch::Contains("hidden detail"));
  }
  {
    StderrCapture cap;
    logging::dump_backtrace();
    logger->flush();
    CHECK_THAT(cap.finish(), Catch::Contains("hidden detail 7"));
  }
  logger->debug("kept for later {}", 8);
  {
    // A poll's expected timeouts dump nothing; the lines stay for the dump of the one that gives up.
    StderrCapture cap;
    {
      logging::QuietTimeouts quiet;
      logging::dump_backtrace();
    }
    logger->flush();
    CHECK_THAT(cap.finish(), !Catch::Contains("kept for later"));
  }
  {
    StderrCapture cap;
    logging::dump_backtrace();
    logger->flush();
    CHECK_THAT(cap.finish(), Catch::Contains("kept for later 8"));
  }
}

TEST_CASE("fault injection: an entry faults only in the run of a restarted job it names", "[base][fault]") {
  fault::arm_from("forward:0:kill:1", 0, 0);
  CHECK(fault::armed());  // no RUN: the first run only
  fault::arm_from("forward:0:kill:1", 0, 1);
  CHECK_FALSE(fault::armed());
  fault::arm_from("forward:0:kill:1:2,forward:1:kill:1:1", 0, 2);
  CHECK(fault::armed());
  fault::arm_from("forward:0:kill:1:2", 0, 1);
  CHECK_FALSE(fault::armed());
  CHECK_THROWS_WITH(fault::arm_from("forward:0:kill:1:x", 0, 0), Catch::Contains("run 'x' is not a number >= 0"));
  CHECK_THROWS_WITH(fault::arm_from("forward:0:kill:1:0:9", 0, 0), Catch::Contains("POINT:RANK:SIGNAL[:NTH[:RUN]]"));
  fault::arm_from("", 0, 0);
  CHECK_FALSE(fault::armed());
}

}  // namespace braid
