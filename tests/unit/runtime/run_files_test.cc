// What `braid run` writes: the checkpoint layout (atomic files, latest, keeping the newest), the
// asynchronous checkpoint writer, the progress line and metrics records, --dump-grads' JSON lines, and the
// parameter names they use.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "nn/serialize.h"
#include "rpc/value.h"
#include "runtime/run/checkpoint_dir.h"
#include "runtime/run/checkpoint_writer.h"
#include "runtime/run/grad_dump.h"
#include "runtime/run/progress.h"
#include "runtime/run/trainer.h"
#include "tensor/factory.h"
#include "tests/support/temp_dir.h"

namespace braid::runtime {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// A fresh directory under the system's temp dir, removed at the end of the test.
using testing::TempDir;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("run: the checkpoint writer copies the state at submit and writes it in the background", "[runtime][run]") {
  TempDir tmp;
  const std::string first = (tmp.path() / "a.brsd").string();
  const std::string second = (tmp.path() / "b.brsd").string();
  Tensor w = from_vector(std::vector<float>{1, 2, 3});
  CheckpointWriter writer;
  writer.submit(first, {{"w", w}, {"step", from_vector(std::vector<int64_t>{7}, {1})}});
  w.fill_(9.0);  // training goes on: the file holds the values at submit
  writer.wait(first);
  const nn::StateDict saved = nn::load_state_dict_file(first);
  REQUIRE(saved.size() == 2);
  CHECK(to_vector<float>(saved[0].second) == std::vector<float>{1, 2, 3});
  CHECK(to_vector<int64_t>(saved[1].second) == std::vector<int64_t>{7});
  // The image (the file's bytes, in whole 4 KiB blocks for O_DIRECT) is kept: a second checkpoint of the
  // same state reuses it.
  const size_t bytes = writer.buffered_bytes();
  CHECK(bytes == 4096);
  writer.submit(second, {{"w", w}, {"step", from_vector(std::vector<int64_t>{8}, {1})}});
  CHECK(writer.buffered_bytes() == bytes);
  bool done = false;
  for (int i = 0; i < 2000 && !done; ++i) {
    done = writer.written(second);  // false while the write runs; true once, then forgotten
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(done);
  CHECK(to_vector<float>(nn::load_state_dict_file(second)[0].second) == std::vector<float>{9, 9, 9});
  CHECK_THROWS_WITH(writer.written(second), Contains("no write of it is pending on this rank"));
  // A write that fails reports its error to the one who asks, naming the file.
  const std::string nowhere = (tmp.path() / "missing-dir" / "c.brsd").string();
  writer.submit(nowhere, {{"w", w}});
  CHECK_THROWS_WITH(writer.wait(nowhere), Contains("missing-dir"));
  CHECK_THROWS_WITH(writer.submit(first, {{"w", Tensor()}}), Contains("'w' is an undefined tensor"));
}

TEST_CASE("run: the checkpoint writer copies deferred entries before the wait for them returns", "[runtime][run]") {
  TempDir tmp;
  const std::string path = (tmp.path() / "a.brsd").string();
  Tensor param = from_vector(std::vector<float>{1, 2, 3});
  Tensor stat = from_vector(std::vector<float>{4, 5});
  CheckpointWriter writer;
  writer.wait_copied();  // nothing in flight: at once
  // The parameter waits for the writer thread; the statistic is copied before submit returns.
  writer.submit(path, {{"param", param}, {"stat", stat}}, [](const std::string& name) { return name == "param"; });
  stat.fill_(0.0);  // a forward changes the statistic at once
  writer.wait_copied();  // what a trainer does before its optimizer step
  param.fill_(0.0);  // the optimizer step
  writer.wait(path);
  const nn::StateDict saved = nn::load_state_dict_file(path);
  REQUIRE(saved.size() == 2);
  CHECK(saved[0].first == "param");  // the state's order
  CHECK(to_vector<float>(saved[0].second) == std::vector<float>{1, 2, 3});
  CHECK(to_vector<float>(saved[1].second) == std::vector<float>{4, 5});
  writer.wait_copied();  // done: at once

  // A deferred parameter whose handle is pointed elsewhere before the copy (FSDP's forward gathers a
  // parameter into its full tensor through Tensor::set_data) is still saved from the storage it had.
  const std::string again = (tmp.path() / "b.brsd").string();
  writer.submit(again, {{"param", param}}, [](const std::string&) { return true; });
  param.set_data(from_vector(std::vector<float>{5, 6, 7, 8, 9}));
  writer.wait(again);
  CHECK(to_vector<float>(nn::load_state_dict_file(again)[0].second) == std::vector<float>{0, 0, 0});
}

TEST_CASE("run: checkpoint directories, latest and keep", "[runtime][run]") {
  TempDir tmp;
  const std::string dir = (tmp.path() / "ckpt").string();
  CHECK(!read_latest(dir).has_value());
  for (int64_t step : {3, 6, 9}) {
    const std::string step_dir = make_step_dir(dir, step);
    CHECK(fs::path(step_dir).filename() == step_dir_name(step));
    std::ofstream(rank_state_path(step_dir, 0)) << "state";
    commit_checkpoint(dir, step_dir, {{"step", step}}, /*keep=*/2);
  }
  CHECK(step_dir_name(9) == "step-00000009");
  CHECK(read(fs::path(dir) / "latest") == "step-00000009\n");
  CHECK(!fs::exists(fs::path(dir) / "step-00000003"));  // only the newest two are kept
  CHECK(fs::exists(fs::path(dir) / "step-00000006" / "meta.json"));
  CHECK(!fs::exists(fs::path(dir) / "latest.tmp"));
  const auto latest = read_latest(dir);
  REQUIRE(latest.has_value());
  CHECK(latest->meta.at("step") == 9);
  CHECK(fs::path(latest->step_dir).filename() == "step-00000009");
  // An incomplete directory (no meta.json) named by latest is an error naming both.
  fs::create_directories(fs::path(dir) / "step-00000012");
  write_file_atomically((fs::path(dir) / "latest").string(), "step-00000012\n");
  CHECK_THROWS_WITH(read_latest(dir), Contains("step-00000012") && Contains("not a complete checkpoint"));
}

TEST_CASE("run: the files of one shard group of a checkpoint", "[runtime][run]") {
  TempDir tmp;
  const std::string step = make_step_dir(tmp.path().string(), 3);
  for (int r : {0, 1, 2, 3}) {
    nn::save_state_dict({{"model.w", from_vector(std::vector<float>{1})}}, rank_state_path(step, r));
  }
  auto ref = [&](nlohmann::json fsdp) {
    return CheckpointRef{step, {{"roles", {{"trainers", {0, 1, 2, 3}}}}, {"job", {{"fsdp", fsdp}}}}};
  };
  CHECK(shard_group_files(ref({{"enabled", false}})) == std::vector<std::string>{rank_state_path(step, 0)});
  CHECK(shard_group_files(ref({{"enabled", true}, {"sharding_strategy", "no_shard"}})).size() == 1);
  CHECK(shard_group_files(ref({{"enabled", true}, {"sharding_strategy", "full_shard"}})).size() == 4);
  const nlohmann::json hybrid{{"enabled", true}, {"sharding_strategy", "hybrid_shard"}, {"shard_group_size", 2}};
  CHECK(shard_group_files(ref(hybrid)) == std::vector<std::string>{rank_state_path(step, 0), rank_state_path(step, 1)});
  fs::remove(rank_state_path(step, 1));
  CHECK_THROWS_WITH(shard_group_files(ref(hybrid)), Contains("rank-1.brsd is missing: it holds shard 1 of 2"));
  CHECK(shard_group_files(ref({{"enabled", false}})).size() == 1);  // copies: trainer 0's file is enough
}

TEST_CASE("run: durations, counts and the metrics record", "[runtime][run]") {
  CHECK(format_duration(0) == "0.0s");
  CHECK(format_duration(1.46) == "1.5s");
  CHECK(format_duration(9.96) == "10s");
  CHECK(format_duration(45.4) == "45s");
  CHECK(format_duration(192) == "3m12s");
  CHECK(format_duration(3725) == "1h02m");
  CHECK(format_count(1234.4) == "1,234");
  CHECK(format_count(999) == "999");
  CHECK(format_count(1234567) == "1,234,567");
  StepReport r{120, 1000, 2, 5, 0.4312, 64, 1234, 12.5};
  const auto j = step_record(r);
  for (const char* key : {"step", "epoch", "loss", "samples", "samples_per_s", "elapsed_s", "time"}) {
    CHECK(j.contains(key));
  }
  CHECK(j.at("step") == 120);
}

TEST_CASE("run: the progress line in a file is one line per call", "[runtime][run]") {
  TempDir tmp;
  const fs::path p = tmp.path() / "out.txt";
  std::FILE* f = std::fopen(p.c_str(), "w");
  REQUIRE(f != nullptr);
  {
    ProgressPrinter printer(f);
    printer.step(StepReport{120, 1000, 2, 5, 0.4312, 64, 1234, 120});
    printer.line("done");
  }
  std::fclose(f);
  CHECK(read(p) == "step 120/1000 epoch 2/5 loss 0.4312 1,234 samples/s ETA 14m40s\ndone\n");
}

TEST_CASE("run: --dump-grads lines hold nested lists in the tensor's shape", "[runtime][run]") {
  CHECK(tensor_to_json(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})).dump() == "[[1.0,2.0,3.0],[4.0,5.0,6.0]]");
  CHECK(tensor_to_json(from_vector<float>({-0.5}, {})).dump() == "-0.5");
  TempDir tmp;
  const fs::path p = tmp.path() / "grads.jsonl";
  {
    GradDumpWriter w(p.string());
    rpc::Dict grads;
    grads.set("fc1.weight", rpc::Value(from_vector<float>({-32, -16, 0, -16}, {2, 2})));
    w.write(0, 1, 0, -3.5, grads);
  }
  CHECK(read(p) == "{\"rank\":0,\"step\":1,\"microbatch\":0,\"loss\":-3.5,\"grads\":{\"fc1.weight\":[[-32.0,-16.0],"
                   "[0.0,-16.0]]}}\n");
}

TEST_CASE("run: parameter names without DDP's module levels", "[runtime][run]") {
  CHECK(plain_parameter_name("module.fc1.weight") == "fc1.weight");
  CHECK(plain_parameter_name("fc2.module.weight") == "fc2.weight");
  CHECK(plain_parameter_name("fc1.weight") == "fc1.weight");
  CHECK(plain_parameter_name("net.module") == "net.module");  // a parameter called "module" stays
}

}  // namespace
}  // namespace braid::runtime
