// Weights in and out of a job (runtime/run/initial_weights.h, runtime/run/export_checkpoint.h): model.init_from
// with PyTorch's weights (the fixture written by tests/fixtures/make_safetensors_fixtures.py) gives PyTorch's
// forward output; strict and non-strict loading with PyTorch's messages; `braid export` of DDP and FSDP
// checkpoints made by hand in the layout of runtime/run/checkpoint_dir.h, bit for bit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "nn/safetensors.h"
#include "nn/serialize.h"
#include "runtime/job/job_spec.h"
#include "runtime/models/model_registry.h"
#include "runtime/run/checkpoint_dir.h"
#include "runtime/run/export_checkpoint.h"
#include "runtime/run/initial_weights.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"
#include "tests/support/temp_dir.h"
#include "tests/support/error_of.h"

using namespace braid;
using braid::testing::error_of;
using namespace braid::runtime;
using braid::testing::TempDir;
using Catch::Matchers::Contains;

namespace {

const std::filesystem::path kFixtures =
    std::filesystem::path(__FILE__).parent_path() / "../../fixtures/safetensors";

std::string fixture(const std::string& name) { return (kFixtures / name).lexically_normal().string(); }

const Tensor& entry(const nn::StateDict& sd, const std::string& name) {
  for (const auto& [n, t] : sd) {
    if (n == name) return t;
  }
  FAIL("no entry " << name);
  static Tensor none;
  return none;
}

// The builtin mlp a job would build: {in: 16, hidden: [32], out: 4}.
std::shared_ptr<nn::Module> fixture_mlp(uint64_t seed = 9) {
  const nlohmann::json args = {{"in", 16}, {"hidden", {32}}, {"out", 4}};
  const nlohmann::json layers = nlohmann::json::array();
  return build_model("mlp", ModelBuild{args, layers, seed, {}, nullptr}, "");
}

ModelSpec init_spec(const std::string& path, bool strict = true) {
  ModelSpec s;
  s.kind = "mlp";
  s.init_from = path;
  s.strict = strict;
  return s;
}

}  // namespace

TEST_CASE("init_from: PyTorch's weights give PyTorch's forward output", "[weights]") {
  auto model = fixture_mlp();
  load_initial_weights(*model, init_spec(fixture("mlp.safetensors")));
  const nn::StateDict file = nn::load_safetensors(fixture("mlp.safetensors"));
  for (const auto& [name, t] : model->state_dict()) CHECK(equal(t, entry(file, name)));
  const nn::StateDict io = nn::load_safetensors(fixture("mlp_io.safetensors"));
  const Tensor out = (*model)(entry(io, "input"));
  const Tensor& expected = entry(io, "output");
  REQUIRE(out.shape() == expected.shape());
  CHECK(allclose(out, expected, 1e-5, 1e-6));
}

TEST_CASE("init_from: strict by default with PyTorch's messages; strict: false loads what fits", "[weights]") {
  TempDir dir("weights");
  const nn::StateDict file = nn::load_safetensors(fixture("mlp.safetensors"));
  // One key renamed: "2.bias" missing, "3.bias" unexpected.
  nn::StateDict renamed;
  for (const auto& [n, t] : file) renamed.emplace_back(n == "2.bias" ? "3.bias" : n, t);
  const std::string path = dir.file("renamed.safetensors");
  nn::save_safetensors(renamed, path);

  auto model = fixture_mlp();
  const nn::StateDict before = model->state_dict();
  std::vector<Tensor> saved;
  for (const auto& [n, t] : before) saved.push_back(t.clone());
  CHECK(error_of([&] { load_initial_weights(*model, init_spec(path)); }) ==
        "model.init_from: " + path + ": Error(s) in loading state_dict for Sequential: Missing key(s) in state_dict: "
        "\"2.bias\". Unexpected key(s) in state_dict: \"3.bias\".");
  size_t i = 0;
  for (const auto& [n, t] : model->state_dict()) CHECK(equal(t, saved[i++]));  // nothing loaded

  load_initial_weights(*model, init_spec(path, /*strict=*/false));
  CHECK(equal(entry(model->state_dict(), "0.weight"), entry(file, "0.weight")));
  CHECK(equal(entry(model->state_dict(), "2.bias"), saved[3]));  // not in the file: kept

  // A shape that does not fit fails either way, and a dtype is converted.
  nn::StateDict wide = file;
  wide[0].second = zeros({32, 17});
  nn::save_safetensors(wide, dir.file("wide.safetensors"));
  CHECK_THAT(error_of([&] { load_initial_weights(*model, init_spec(dir.file("wide.safetensors"), false)); }),
             Contains("size mismatch for 0.weight: copying a param with shape [32, 17] from checkpoint, the shape in "
                      "current model is [32, 16]"));
  nn::StateDict half;
  for (const auto& [n, t] : file) half.emplace_back(n, t.to(DType::Float16));
  nn::save_safetensors(half, dir.file("half.safetensors"));
  load_initial_weights(*model, init_spec(dir.file("half.safetensors")));
  CHECK(entry(model->state_dict(), "0.weight").dtype() == DType::Float32);
  CHECK(equal(entry(model->state_dict(), "0.weight"), entry(file, "0.weight").to(DType::Float16).to(DType::Float32)));
  CHECK_THAT(error_of([&] { load_initial_weights(*model, init_spec(dir.file("nope.safetensors"))); }),
             Contains("model.init_from: ") && Contains("nope.safetensors"));
}

namespace {

// A checkpoint of `job` at step 7 in the layout of checkpoint_dir.h, with `states[i]` as trainer i's model.
std::string write_checkpoint(TempDir& dir, const JobSpec& job, const std::vector<nn::StateDict>& states) {
  const std::string root = dir.file("ckpt");
  const std::string step = make_step_dir(root, 7);
  for (size_t i = 0; i < states.size(); ++i) {
    nn::StateDict prefixed;
    for (const auto& [n, t] : states[i]) prefixed.emplace_back("model." + n, t);
    prefixed.emplace_back("optimizer.step", full({1}, 7.0));
    nn::save_state_dict(prefixed, rank_state_path(step, job.roles.trainers[i]));
  }
  nlohmann::json roles{{"trainers", job.roles.trainers}, {"workers", job.roles.workers}};
  commit_checkpoint(root, step, {{"step", 7}, {"epoch", 1}, {"world_size", 2}, {"roles", roles}, {"job", to_json(job)}}, 2);
  return root;
}

JobSpec mlp_job(bool fsdp) {
  return parse_job_text(std::string("name: exp\nroles: {trainers: 2}\nmodel: {kind: mlp, args: {in: 16, hidden: [32], "
                                    "out: 4}}\n") +
                            (fsdp ? "ddp: {mode: none}\nfsdp: {enabled: true, wrap: [\"0\", \"2\"]}\n" : ""),
                        "exp.yaml", "/jobs");
}

}  // namespace

TEST_CASE("braid export: a DDP checkpoint's model, bit for bit", "[weights]") {
  TempDir dir("export");
  const nn::StateDict weights = nn::load_safetensors(fixture("mlp.safetensors"));
  const std::string ckpt = write_checkpoint(dir, mlp_job(false), {weights, weights});
  const std::string out = dir.file("model.safetensors");
  const ExportResult r = export_checkpoint(ckpt, out);
  CHECK(r.step == 7);
  CHECK(r.tensors == 4);
  CHECK(r.model_kind == "mlp");
  const nn::StateDict got = nn::load_safetensors(out);
  REQUIRE(got.size() == 4);
  for (const auto& [n, t] : weights) CHECK(equal(entry(got, n), t));
  // A step directory works as well as the checkpoint.dir.
  CHECK(export_checkpoint(r.step_dir, dir.file("again.safetensors")).tensors == 4);
}

TEST_CASE("braid export: FSDP's shards put back together in rank order", "[weights]") {
  TempDir dir("export");
  const nn::StateDict weights = nn::load_safetensors(fixture("mlp.safetensors"));
  // Each trainer's rows of every parameter (unpadded, dim 0): 32 rows split 16 + 16, 4 rows split 2 + 2.
  std::vector<nn::StateDict> shards(2);
  for (const auto& [n, t] : weights) {
    const int64_t half = (t.size(0) + 1) / 2;
    shards[0].emplace_back(n, t.narrow(0, 0, half).contiguous());
    shards[1].emplace_back(n, t.narrow(0, half, t.size(0) - half).contiguous());
  }
  const std::string ckpt = write_checkpoint(dir, mlp_job(true), shards);
  const std::string out = dir.file("model.safetensors");
  export_checkpoint(ckpt, out);
  const nn::StateDict got = nn::load_safetensors(out);
  for (const auto& [n, t] : weights) CHECK(equal(entry(got, n), t));
}

TEST_CASE("braid export: what is not a checkpoint is named", "[weights]") {
  TempDir dir("export");
  CHECK_THAT(error_of([&] { export_checkpoint(dir.file("none"), dir.file("x.safetensors")); }),
             Contains("braid export: ") && Contains("none: no such directory"));
  std::filesystem::create_directories(dir.file("empty"));
  CHECK_THAT(error_of([&] { export_checkpoint(dir.file("empty"), dir.file("x.safetensors")); }),
             Contains("is not a checkpoint: it has neither 'latest' (a checkpoint.dir) nor 'meta.json'"));
}
