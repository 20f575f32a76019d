// The bounds a job file is held to before anything runs: its size and the number of YAML nodes it expands
// to (nested aliases, a "billion laughs"), every duration's range, and a model too large for any machine
// this runs on. Each rejection names the file, the key and the limit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>

#include "base/error.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/yaml_tree.h"
#include "runtime/models/model_registry.h"
#include "tests/support/error_of.h"
#include "tests/support/temp_dir.h"

using namespace braid;
using braid::testing::error_of;
using namespace braid::runtime;
using Catch::Matchers::Contains;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(__FILE__).parent_path() / "../../fixtures/jobs";

std::string fixture(const std::string& name) { return (kFixtures / name).lexically_normal().string(); }

std::string parse_error(const std::string& yaml) {
  return error_of([&] { parse_job_text(yaml, "job.yaml", "/jobs"); });
}

const std::string kMinimal = "roles: {trainers: 2}\nmodel: {kind: mlp}\n";

}  // namespace

TEST_CASE("job limits: nested YAML aliases are refused after a bounded number of nodes", "[job][limits]") {
  // 378 bytes that expand to 9^9 (387 million) scalars: before the bound, converting them took minutes and
  // gigabytes. The test finishes only because the conversion stops at the limit.
  const std::string message = error_of([] { parse_job_file(fixture("bad_yaml_aliases.yaml")); });
  CHECK_THAT(message, Contains("bad_yaml_aliases.yaml: the YAML expands to more than 100000 nodes"));
  CHECK_THAT(message, Contains("Aliases (*name)"));
  // Aliases used a few times are fine, as is any job below the limit.
  const job_detail::YamlTree tree = job_detail::parse_yaml("a: &x [1, 2]\nb: *x\nc: *x\n", "t.yaml");
  CHECK(tree.value["c"] == nlohmann::json::array({1, 2}));
}

TEST_CASE("job limits: a job file's size is bounded, whatever kind of file it is", "[job][limits]") {
  testing::TempDir dir("job_limits");
  const std::string big = dir.write("big.yaml", "# " + std::string(job_detail::kMaxYamlBytes, 'x') + "\n" + kMinimal);
  CHECK_THAT(error_of([&] { parse_job_file(big); }), Contains("big.yaml: the job file is larger than the limit of "
                                                               "1048576 bytes"));
  // A device that never ends is read only up to the limit.
  CHECK_THAT(error_of([] { parse_job_file("/dev/zero"); }), Contains("/dev/zero: the job file is larger than"));
  CHECK_THAT(parse_error("# " + std::string(job_detail::kMaxYamlBytes, 'x') + "\n"),
             Contains("job.yaml: the YAML text is 1048579 bytes, more than the limit of 1048576 bytes"));
}

TEST_CASE("job limits: every duration is checked for range where it is parsed", "[job][limits]") {
  const std::pair<const char*, const char*> fields[] = {{"rpc: {timeout_s: ", "rpc.timeout_s"},
                                                         {"failure: {timeout_s: ", "failure.timeout_s"},
                                                         {"failure: {context_ttl_s: ", "failure.context_ttl_s"}};
  for (const auto& [yaml, key] : fields) {
    CHECK_THAT(parse_error(kMinimal + yaml + ".nan}\n"),
               Contains(std::string("job.yaml:3: ") + key + ": expected a number, got .nan"));
    for (const char* bad : {"1e10", "2592001", ".inf", "-.inf", "-1", "0", "0.0001"}) {
      INFO(key << " = " << bad);
      CHECK_THAT(parse_error(kMinimal + yaml + bad + "}\n"),
                 Contains(std::string("job.yaml:3: ") + key + ": must be a duration in seconds"));
    }
    CHECK_THAT(parse_error(kMinimal + yaml + "1e10}\n"), Contains("> 0 and at most 2592000 (30 days), got 1"));
  }
  // heartbeat_s must also stay below timeout_s; at the limit both are accepted.
  CHECK_THAT(parse_error(kMinimal + "failure: {heartbeat_s: 1e10}\n"), Contains("failure.heartbeat_s: must be a duration"));
  const JobSpec job = parse_job_text(kMinimal + "rpc: {timeout_s: 2592000}\nfailure: {timeout_s: 2592000, heartbeat_s: "
                                                "0.5, context_ttl_s: 0.001}\n",
                                     "job.yaml", "/jobs");
  CHECK(job.rpc.timeout_s == 2592000);
  CHECK(job.failure.timeout_s == 2592000);
  // --set goes through the same checks.
  JobSpec minimal = parse_job_text(kMinimal, "job.yaml", "/jobs");
  CHECK_THAT(error_of([&] { apply_override(minimal, "failure.timeout_s=1e10"); }),
             Contains("failure.timeout_s: must be a duration in seconds"));
}

TEST_CASE("job limits: a model larger than this machine's memory is refused before it is built", "[job][limits]") {
  const JobSpec job = parse_job_file(fixture("bad_mlp_too_large.yaml"));
  const std::string message = error_of([&] { validate_job_model(job); });
  // 784 x 4e9 + 4e9 x 10 weights: 3.176e12 parameters, 11831 GiB.
  CHECK_THAT(message, Contains("bad_mlp_too_large.yaml: model.args.hidden[0]: the mlp (its largest layer "
                               "Linear(784, 4000000000)) has 3.176e+12 parameters, 1.183e+04 GiB as float32, more "
                               "than this machine's"));
  JobSpec fits = job;
  fits.model.args["hidden"] = nlohmann::json::array({64});
  CHECK_NOTHROW(validate_job_model(fits));
}
