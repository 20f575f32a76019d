#include "runtime/run/export_checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <vector>

#include "base/check.h"
#include "nn/safetensors.h"
#include "nn/serialize.h"
#include "parallel/fsdp/reshard.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"
#include "runtime/run/checkpoint_dir.h"

namespace braid::runtime {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The step directory and its meta.json: from <dir>/latest, or `dir` itself when it is a step directory.
CheckpointRef find_checkpoint(const std::string& dir) {
  std::error_code ec;
  BRAID_CHECK_ARG(fs::is_directory(dir, ec), "braid export: {}: no such directory", dir);
  if (auto latest = read_latest(dir)) return *latest;
  BRAID_CHECK_ARG(fs::is_regular_file(fs::path(dir) / "meta.json", ec),
                  "braid export: {} is not a checkpoint: it has neither 'latest' (a checkpoint.dir) nor 'meta.json' "
                  "(a step directory)", dir);
  return read_step_dir(dir);
}

const json& member(const json& j, const char* key, const std::string& where) {
  BRAID_CHECK_ARG(j.is_object() && j.contains(key), "braid export: {} has no '{}'", where, key);
  return j.at(key);
}

// The job's plugins, so that a model a plugin registers can be built here.
void load_plugins_of(const json& job, const std::string& where) {
  if (job.contains("plugins") && job.at("plugins").is_array()) {
    for (const json& p : job.at("plugins")) load_plugin(p.get<std::string>(), "plugins in " + where);
  }
  const json& model = member(job, "model", where);
  if (model.contains("plugin") && model.at("plugin").is_string() && !model.at("plugin").get<std::string>().empty()) {
    load_plugin(model.at("plugin").get<std::string>(), "model.plugin in " + where);
  }
}

// "model.<name>" entries of one trainer's state file, without the prefix.
nn::StateDict model_entries(const std::string& path) {
  nn::StateDict out;
  for (auto& [name, t] : nn::load_state_dict_file(path)) {
    if (name.rfind("model.", 0) == 0) out.emplace_back(name.substr(6), t);
  }
  BRAID_CHECK_ARG(!out.empty(), "braid export: {} holds no model entries", path);
  return out;
}

}  // namespace

ExportResult export_checkpoint(const std::string& checkpoint, const std::string& output) {
  const CheckpointRef ref = find_checkpoint(checkpoint);
  const std::string where = (fs::path(ref.step_dir) / "meta.json").string();
  const json& job = member(ref.meta, "job", where);
  const json& model = member(job, "model", where);
  ExportResult result;
  result.step_dir = ref.step_dir;
  result.step = ref.meta.value("step", int64_t{0});
  result.model_kind = member(model, "kind", where).get<std::string>();

  load_plugins_of(job, where);
  const ModelDefinition& def = get_model(result.model_kind);
  static const json kEmptyObject = json::object();
  static const json kEmptyArray = json::array();
  const json& args = model.contains("args") && model.at("args").is_object() ? model.at("args") : kEmptyObject;
  const json& layers = model.contains("layers") && model.at("layers").is_array() ? model.at("layers") : kEmptyArray;
  if (def.remote_parts && !def.remote_parts(args).empty()) {
    BRAID_THROW(InvalidArgument, "braid export: model '{}' of {} keeps parts on workers; only models that live "
                "whole on the trainers can be exported", result.model_kind, ref.step_dir);
  }
  const ModelBuild build{args, layers, model.value("init_seed", uint64_t{0}), {}, nullptr};
  std::shared_ptr<nn::Module> module = build_model(result.model_kind, build, "this process (braid export)");

  const json& trainers = member(member(ref.meta, "roles", where), "trainers", where);
  BRAID_CHECK_ARG(trainers.is_array() && !trainers.empty(), "braid export: {} names no trainers", where);
  const bool sharded = job.contains("fsdp") && job.at("fsdp").value("enabled", false);
  if (sharded) {
    // One shard group's files hold every row (hybrid_shard's other groups are copies of it).
    const parallel::fsdp::ShardedFiles files(shard_group_files(ref));
    parallel::fsdp::load_sharded_files(
        *module, files, [](const std::string& key) { return "model." + key; }, "model.");
  } else {
    module->load_state_dict(model_entries(rank_state_path(ref.step_dir, trainers.at(0).get<int>())), /*strict=*/true);
  }

  const nn::StateDict state = module->state_dict();
  for (const auto& [name, t] : state) result.bytes += t.nbytes();
  result.tensors = state.size();
  nn::save_safetensors(state, output,
                       {{"format", "pt"},
                        {"braid.job", job.value("name", std::string())},
                        {"braid.step", std::to_string(result.step)},
                        {"braid.model", result.model_kind}});
  return result;
}

}  // namespace braid::runtime
