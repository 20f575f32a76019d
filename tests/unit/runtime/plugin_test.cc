// Plugins (runtime/plugin/): loading the test plugins of tests/plugins/, what each registers, the job keys that
// name them (model.plugin, plugins, loss, data.kind, ddp.comm_hook) and every way a library is refused, with
// the words of each message. The plugins' paths come from CMake (BRAID_TEST_PLUGIN_*).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "runtime/data/dataset_registry.h"
#include "runtime/job/job_spec.h"
#include "runtime/models/comm_hook_registry.h"
#include "runtime/models/loss.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"
#include "tensor/factory.h"
#include "tests/support/error_of.h"

using namespace braid;
using braid::testing::error_of;
using namespace braid::runtime;
using Catch::Matchers::Contains;

namespace {

std::string canonical(const char* path) { return std::filesystem::canonical(path).string(); }

JobSpec job_with(const std::string& extra) {
  return parse_job_text("roles: {trainers: 2}\nmodel: {kind: mlp, args: {in: 4, hidden: [8], out: 2}}\n" + extra,
                        "job.yaml", "/jobs");
}

}  // namespace

TEST_CASE("plugins: one of everything registers and is used by name", "[plugin]") {
  const LoadedPlugin kit = load_plugin(BRAID_TEST_PLUGIN_kit, "a test");
  CHECK(kit.name == "test_kit");
  CHECK(kit.version == "0.3");
  CHECK(kit.path == canonical(BRAID_TEST_PLUGIN_kit));
  CHECK(kit.models == std::vector<std::string>{"throwing_net"});
  CHECK(kit.losses == std::vector<std::string>{"abs_mean"});
  CHECK(kit.datasets == std::vector<std::string>{"ramp"});
  CHECK(kit.comm_hooks == std::vector<std::string>{"logged_allreduce"});
  CHECK_THAT(describe(kit), Contains("test_kit 0.3 (") && Contains("models throwing_net; losses abs_mean; data kinds "
                                                                     "ramp; comm hooks logged_allreduce"));
  // Loading the same file again (by another path to it) is the same plugin, registered once.
  const LoadedPlugin again = load_plugin(std::filesystem::path(BRAID_TEST_PLUGIN_kit).string());
  CHECK(again.path == kit.path);

  SECTION("a plugin's loss by name") {
    JobSpec job = job_with("loss: abs_mean\n");
    CHECK(job.loss == LossKind::Registered);
    CHECK(job.loss_name == "abs_mean");
    CHECK(to_json(job)["loss"] == "abs_mean");
    CHECK_NOTHROW(validate_job_model(job));
    const Tensor out = from_vector(std::vector<float>{1, 0, 0, 1}, {2, 2});
    const Tensor target = from_vector(std::vector<int64_t>{0, 0}, {2});
    CHECK(compute_job_loss(job, out, target).item<double>() == Approx(0.5));
    CHECK(loss_origin("abs_mean") == kit.path);
  }
  SECTION("a plugin's data kind by name, with its args checked") {
    JobSpec job = job_with("data: {kind: ramp, args: {n: 10, features: 3, classes: 2}}\n");
    CHECK(job.data.kind == DataKind::Registered);
    CHECK(job.data.kind_name == "ramp");
    CHECK_NOTHROW(validate_job_model(job));
    const auto train = make_dataset(job.data, Split::Train);
    REQUIRE(train != nullptr);
    CHECK(train->size() == 10);
    CHECK(make_dataset(job.data, Split::Test) == nullptr);
    JobSpec bad = job_with("data: {kind: ramp, args: {rows: 10}}\n");
    CHECK_THAT(error_of([&] { validate_job_model(bad); }),
               Contains("data.args.rows: unknown argument of data kind 'ramp'"));
  }
  SECTION("a plugin's comm hook by name") {
    JobSpec job = job_with("ddp: {comm_hook: logged_allreduce}\n");
    CHECK(job.ddp.comm_hook == "logged_allreduce");
    CHECK_NOTHROW(validate_job_model(job));
    JobSpec with_args = job_with("ddp: {comm_hook: {kind: quantize_per_channel, args: {bucket_size: 64}}}\n");
    CHECK_NOTHROW(validate_job_model(with_args));
    // The hook and its args survive `--set` (which re-parses the job's JSON).
    apply_override(with_args, "train.epochs=2");
    CHECK(with_args.ddp.comm_hook == "quantize_per_channel");
    CHECK(with_args.ddp.comm_hook_args == nlohmann::json{{"bucket_size", 64}});
  }
  SECTION("unknown names list every known one, the plugins' marked") {
    const std::string lib = std::filesystem::path(kit.path).filename().string();
    CHECK_THAT(error_of([] { validate_job_model(job_with("loss: abs_maen\n")); }),
               Contains("loss: unknown loss 'abs_maen' (did you mean 'abs_mean'?) (known: abs_mean (plugin " + lib +
                        "), cross_entropy, mse, weighted_sum)"));
    CHECK_THAT(error_of([] { validate_job_model(job_with("ddp: {comm_hook: fp8}\n")); }),
               Contains("ddp.comm_hook: unknown comm hook 'fp8'") && Contains("logged_allreduce (plugin " + lib + ")"));
    CHECK_THAT(error_of([] { validate_job_model(job_with("data: {kind: rampp}\n")); }),
               Contains("data.kind: unknown data kind 'rampp' (did you mean 'ramp'?) (known: synthetic, csv, binary, "
                        "npy, hybrid_examples, ramp (plugin " + lib + "))"));
    CHECK_THAT(error_of([] { get_model("throwing_nett"); }),
               Contains("unknown model 'throwing_nett'") && Contains("throwing_net (plugin " + lib + ")"));
  }
  SECTION("a model that throws while building names the plugin, the kind and where") {
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json layers = nlohmann::json::array();
    const ModelBuild b{none, layers, 0, {}, nullptr};
    CHECK(error_of([&] { build_model("throwing_net", b, "rank 3 (trainer 1 of 2)"); }) ==
          "plugin " + kit.path + ": model 'throwing_net' threw while building on rank 3 (trainer 1 of 2): out of cheese");
  }
}

TEST_CASE("plugins: model.plugin must register model.kind", "[plugin]") {
  JobSpec job = parse_job_text(std::string("roles: {trainers: 2}\nmodel: {plugin: ") + BRAID_MY_NET_PLUGIN +
                                   ", kind: my_nett, args: {in: 4, out: 2}}\n",
                               "job.yaml", "/jobs");
  CHECK(job.model.plugin == BRAID_MY_NET_PLUGIN);
  const std::string e = error_of([&] { load_job_plugins(job); });
  CHECK_THAT(e, Contains("job.yaml: model.kind: unknown model 'my_nett' (did you mean 'my_net'?)") &&
                    Contains("my_net (plugin libmy_net.so)") && Contains("mlp") &&
                    Contains("(model.plugin) registers my_net"));
  // A kind that exists, but from braid itself, not from the plugin named.
  job.model.kind = "mlp";
  CHECK_THAT(error_of([&] { load_job_plugins(job); }),
             Contains("registers no model 'mlp' (it registers my_net); 'mlp' comes from braid itself"));
  job.model.kind = "my_net";
  const auto loaded = load_job_plugins(job);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].models == std::vector<std::string>{"my_net"});
}

TEST_CASE("plugins: every way a library is refused", "[plugin]") {
  SECTION("no such file, named by its key") {
    JobSpec job = job_with("plugins: [libnope.so]\n");
    CHECK(job.plugins == std::vector<std::string>{"/jobs/libnope.so"});
    CHECK(error_of([&] { load_job_plugins(job); }) == "plugin /jobs/libnope.so (plugins[0] in job.yaml): no such file");
  }
  SECTION("a file that is not a shared library") {
    const std::string path = (std::filesystem::temp_directory_path() / "braid_plugin_test_not_elf.so").string();
    { std::ofstream(path) << std::string(512, '#') << "\n"; }  // long enough to be read as a header
    CHECK_THAT(error_of([&] { load_plugin(path); }), Contains("plugin " + path + ": cannot load it: ") &&
                                                           Contains("invalid ELF header"));
    std::filesystem::remove(path);
  }
  SECTION("a shared library that is not a braid plugin") {
    CHECK(error_of([] { load_plugin(BRAID_TEST_PLUGIN_not_a, "model.plugin in job.yaml"); }) ==
          "plugin " + canonical(BRAID_TEST_PLUGIN_not_a) +
              " (model.plugin in job.yaml): not a braid plugin: it has no braid_plugin_info entry point (a plugin "
              "defines its entry points with BRAID_PLUGIN from runtime/plugin/plugin.h)");
  }
  SECTION("a missing entry point") {
    CHECK(error_of([] { load_plugin(BRAID_TEST_PLUGIN_no_register); }) ==
          "plugin " + canonical(BRAID_TEST_PLUGIN_no_register) +
              " (half_plugin 1.0): missing entry point braid_plugin_register (BRAID_PLUGIN defines it)");
  }
  SECTION("built against another braid version, naming both") {
    CHECK_THAT(error_of([] { load_plugin(BRAID_TEST_PLUGIN_wrong_version); }),
               Contains("plugin " + canonical(BRAID_TEST_PLUGIN_wrong_version) + " was built against braid 0.0.9") &&
                   Contains(std::string("but this is braid ") + BRAID_VERSION) &&
                   Contains(std::string("rebuild the plugin against braid ") + BRAID_VERSION));
  }
  SECTION("a registration that throws registers nothing") {
    CHECK(error_of([] { load_plugin(BRAID_TEST_PLUGIN_register_throws); }) ==
          "plugin " + canonical(BRAID_TEST_PLUGIN_register_throws) +
              ": its registration threw: the plugin's configuration file is missing");
    CHECK(find_loss("never_loss") == nullptr);
  }
  SECTION("a name braid already has refuses the whole plugin") {
    CHECK(error_of([] { load_plugin(BRAID_TEST_PLUGIN_clash); }) ==
          "plugin " + canonical(BRAID_TEST_PLUGIN_clash) +
              ": registers model 'mlp', but braid already has one by that name (built in)");
    CHECK(find_loss("clash_loss") == nullptr);
    CHECK(error_of([] { load_plugin(BRAID_TEST_PLUGIN_clash_data); }) ==
          "plugin " + canonical(BRAID_TEST_PLUGIN_clash_data) +
              ": registers data kind 'npy', but braid already has one by that name (built in)");
    CHECK(find_model("clash_data_net") == nullptr);
  }
  // None of the refused libraries is listed as loaded.
  for (const LoadedPlugin& p : loaded_plugins()) {
    CHECK(p.name != "old_plugin");
    CHECK(p.name != "clash");
  }
}
