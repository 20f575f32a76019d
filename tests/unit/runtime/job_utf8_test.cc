// Job files whose strings are not UTF-8 (found by fuzz/fuzz_job_yaml.cc): refused where they are read,
// naming the file, line and key, instead of an unnamed nlohmann type_error when the job is printed,
// described in an error message or stored with a checkpoint.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.h"
#include "runtime/job/job_spec.h"
#include "tests/support/error_of.h"

using namespace braid;
using braid::testing::error_of;
using namespace braid::runtime;
using Catch::Matchers::Contains;

namespace {

const std::string kMinimal = "roles: {trainers: 2}\nmodel: {kind: mlp}\n";

std::string parse_error(const std::string& yaml) {
  return error_of([&] { parse_job_text(yaml, "job.yaml", "/jobs"); });
}

TEST_CASE("a job value that is not UTF-8 is refused with its line and key", "[job]") {
  // 0xf6 alone ('ö' in Latin-1) is no UTF-8; the unknown-backend message used to quote it and throw.
  CHECK_THAT(parse_error(kMinimal + "backend: gl\xf6o\n"), Contains("job.yaml:3: backend: the value is not valid UTF-8"));
  CHECK_THAT(parse_error(kMinimal + "name: ok\nlog: {metrics: \"m\xc3\"}\n"),
             Contains("job.yaml:4: log.metrics: the value is not valid UTF-8"));
}

TEST_CASE("a job key that is not UTF-8 is refused without quoting it", "[job]") {
  const std::string msg = parse_error(kMinimal + "train: {\xff\xfe: 1}\n");
  CHECK_THAT(msg, Contains("job.yaml:3: train: a key is not valid UTF-8"));
  CHECK(msg.find('\xff') == std::string::npos);
}

TEST_CASE("an override value that is not UTF-8 is refused", "[job]") {
  JobSpec job = parse_job_text(kMinimal, "job.yaml", "/jobs");
  CHECK_THROWS_AS(apply_override(job, "name=\xe2\x82"), InvalidArgument);
  // model.args is free-form: a key that is not UTF-8 would have become a key of the job's JSON.
  CHECK_THAT(error_of([&] { apply_override(job, "model.args.h\xff=[4]"); }),
             Contains("--set KEY=VALUE: the key is not valid UTF-8"));
  CHECK(job.name == "job");
}

TEST_CASE("UTF-8 beyond ASCII is kept", "[job]") {
  const JobSpec job = parse_job_text(kMinimal + "log: {metrics: r\xc3\xa9seau.jsonl}\n", "job.yaml", "/jobs");
  CHECK(job.log.metrics == "/jobs/r\xc3\xa9seau.jsonl");
  CHECK(to_json(job).dump().find("r\xc3\xa9seau.jsonl") != std::string::npos);
}

}  // namespace
