// A job as JSON (to_json), the names of its enums, and `--set KEY=VALUE` overrides. An override edits the
// job's own JSON and parses it again, so that it passes exactly the checks of a job file.
#include <fmt/format.h>

#include <filesystem>

#include "base/error.h"
#include "runtime/job/job_fields.h"
#include "runtime/job/job_parse.h"
#include "runtime/job/yaml_tree.h"

namespace braid::runtime {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string to_string(Partition v) { return v == Partition::Interleaved ? "interleaved" : "contiguous"; }

json optional_json(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }

// Where relative paths of an override resolve, as the job file's own do.
fs::path job_dir(const JobSpec& job) {
  return job.file.empty() ? fs::current_path() : fs::absolute(fs::path(job.file)).parent_path();
}

// "model.layers[0].out" → {"model", "layers", "0", "out"}.
std::vector<std::string> split_key(std::string key) {
  for (char& c : key) {
    if (c == '[') c = '.';
  }
  std::vector<std::string> parts;
  std::string part;
  for (char c : key) {
    if (c == ']') continue;
    if (c == '.') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  return parts;
}

// The slot `key` names in `tree`. New keys may be made only where the job takes free-form mappings: the
// model's arguments and its layers.
json& find_slot(json& tree, const std::string& key) {
  const std::vector<std::string> parts = split_key(key);
  json* node = &tree;
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) job_detail::fail(key, "the key has an empty part");
    const bool free_form =
        parts.size() > 2 && parts[0] == "model" && (parts[1] == "args" || parts[1] == "layers") && i >= 2;
    const std::string here = path.empty() ? part : path + "." + part;
    if (node->is_object()) {
      if (!node->contains(part) && !free_form) {
        std::vector<std::string> known;
        for (const auto& [k, v] : node->items()) known.push_back(k);
        job_detail::fail(here, job_detail::unknown_key_reason(part, known));
      }
      node = &(*node)[part];
    } else if (node->is_array()) {
      size_t index = 0;
      try {
        size_t used = 0;
        index = std::stoul(part, &used);
        if (used != part.size()) throw std::invalid_argument(part);
      } catch (const std::exception&) {
        job_detail::fail(path, fmt::format("is a list: index it with a number, not '{}'", part));
      }
      if (index >= node->size()) job_detail::fail(path, fmt::format("has {} item(s), no item {}", node->size(), index));
      node = &(*node)[index];
    } else if (node->is_null() && free_form) {
      *node = json::object();
      node = &(*node)[part];
    } else {
      job_detail::fail(path, fmt::format("is {}, so it has no key '{}'", job_detail::describe(*node), part));
    }
    path = here;
  }
  return *node;
}

}  // namespace

std::string to_string(Backend v) {
  switch (v) {
    case Backend::Mpi: return "mpi";
    case Backend::Gloo: return "gloo";
    case Backend::Nccl: return "nccl";
  }
  return "?";
}

std::string to_string(DdpMode v) {
  switch (v) {
    case DdpMode::None: return "none";
    case DdpMode::Inside: return "inside";
    case DdpMode::Outside: return "outside";
  }
  return "?";
}

std::string to_string(LossKind v) {
  switch (v) {
    case LossKind::CrossEntropy: return "cross_entropy";
    case LossKind::Mse: return "mse";
    case LossKind::WeightedSum: return "weighted_sum";
    case LossKind::Registered: return "registered";
  }
  return "?";
}

std::string to_string(OptimizerKind v) {
  switch (v) {
    case OptimizerKind::None: return "none";
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

std::string to_string(DataKind v) {
  switch (v) {
    case DataKind::Synthetic: return "synthetic";
    case DataKind::Csv: return "csv";
    case DataKind::Binary: return "binary";
    case DataKind::HybridExamples: return "hybrid_examples";
    case DataKind::Npy: return "npy";
    case DataKind::Registered: return "registered";
  }
  return "?";
}

std::string to_string(DeviceKind v) { return v == DeviceKind::Cuda ? "cuda" : "cpu"; }

Backend trainers_backend(const JobSpec& job) {
  return job.devices.trainer() == DeviceKind::Cuda ? Backend::Nccl : job.backend;
}

Backend world_backend(const JobSpec& job) { return job.backend == Backend::Nccl ? Backend::Gloo : job.backend; }

std::string to_string(RpcTransport v) {
  switch (v) {
    case RpcTransport::Auto: return "auto";
    case RpcTransport::Tcp: return "tcp";
    case RpcTransport::Ucx: return "ucx";
  }
  return "?";
}
std::string to_string(ShardingStrategy v) {
  switch (v) {
    case ShardingStrategy::FullShard: return "full_shard";
    case ShardingStrategy::ShardGradOp: return "shard_grad_op";
    case ShardingStrategy::NoShard: return "no_shard";
    case ShardingStrategy::HybridShard: return "hybrid_shard";
  }
  return "?";
}

json to_json(const JobSpec& job) {
  const DataSpec& d = job.data;
  const OptimizerSpec& o = job.optimizer;
  json j;
  j["name"] = job.name;
  j["backend"] = to_string(job.backend);
  // Per role only where set, so that `--set device=cuda` moves every role that follows `device`.
  const auto role_device = [](const std::optional<DeviceKind>& kind) {
    return kind ? json(to_string(*kind)) : json(nullptr);
  };
  j["device"] = to_string(job.devices.all);
  j["devices"] = {{"trainers", role_device(job.devices.trainers)}, {"workers", role_device(job.devices.workers)}};
  j["rpc"] = {{"transport", to_string(job.rpc.transport)}, {"timeout_s", job.rpc.timeout_s}};
  j["roles"] = {{"trainers", job.roles.trainers},
                {"workers", job.roles.workers},
                {"master", job.roles.master ? json(*job.roles.master) : json(nullptr)}};
  j["model"] = {{"kind", job.model.kind},
                {"args", job.model.args.is_null() ? json::object() : job.model.args},
                {"layers", job.model.layers.is_null() ? json::array() : job.model.layers},
                {"init_seed", job.model.init_seed},
                {"plugin", job.model.plugin},
                {"init_from", job.model.init_from},
                {"strict", job.model.strict}};
  j["plugins"] = job.plugins;
  j["loss"] = job.loss_name;
  j["data"] = {{"kind", d.kind == DataKind::Registered ? d.kind_name : to_string(d.kind)},
               {"args", d.kind == DataKind::Registered ? d.args : json(nullptr)},
               {"path", d.path},
               {"test_path", d.test_path},
               {"inputs", d.inputs},
               {"targets", d.targets},
               {"test_inputs", d.test_inputs},
               {"test_targets", d.test_targets},
               {"header", d.header},
               {"label_column", d.label_column},
               {"feature_columns", d.feature_columns},
               {"feature_scale", d.feature_scale},
               {"num_samples", d.num_samples},
               {"num_features", d.num_features},
               {"num_classes", d.num_classes},
               {"seed", d.seed},
               {"partition", to_string(d.partition)},
               {"shuffle", d.shuffle},
               {"drop_last", d.drop_last},
               {"uneven", d.uneven},
               {"micro_batch", d.micro_batch}};
  j["optimizer"] = {{"kind", to_string(o.kind)},
                    {"lr", o.lr},
                    {"momentum", o.momentum},
                    {"weight_decay", o.weight_decay},
                    {"beta1", o.beta1},
                    {"beta2", o.beta2},
                    {"eps", o.eps}};
  j["ddp"] = {{"mode", to_string(job.ddp.mode)},
              {"bucket_cap_mb", job.ddp.bucket_cap_mb},
              {"gradient_as_bucket_view", job.ddp.gradient_as_bucket_view},
              {"find_unused_parameters", job.ddp.find_unused_parameters},
              {"static_graph", job.ddp.static_graph},
              {"comm_hook", job.ddp.comm_hook.empty() ? json(nullptr)
                                                      : json{{"kind", job.ddp.comm_hook}, {"args", job.ddp.comm_hook_args}}}};
  j["fsdp"] = {{"enabled", job.fsdp.enabled},
               {"sharding_strategy", to_string(job.fsdp.sharding_strategy)},
               {"wrap", job.fsdp.wrap},
               {"shard_group_size", job.fsdp.shard_group_size},
               {"param_dtype", optional_json(job.fsdp.param_dtype)},
               {"reduce_dtype", optional_json(job.fsdp.reduce_dtype)}};
  j["train"] = {{"epochs", job.train.epochs},
                {"steps", job.train.steps},
                {"batch_size", job.train.batch_size},
                {"seed", job.train.seed},
                {"eval_every", job.train.eval_every}};
  j["checkpoint"] = {{"dir", job.checkpoint.dir},
                     {"interval", job.checkpoint.interval},
                     {"keep", job.checkpoint.keep},
                     {"async", job.checkpoint.async}};
  j["log"] = {{"level", job.log.level}, {"interval", job.log.interval}, {"metrics", job.log.metrics}};
  j["failure"] = {{"timeout_s", job.failure.timeout_s},
                  {"heartbeat_s", job.failure.heartbeat_s},
                  {"context_ttl_s", job.failure.context_ttl_s},
                  {"max_restarts", job.failure.max_restarts},
                  {"backoff_s", job.failure.backoff_s},
                  {"stall_warn_s", job.failure.stall_warn_s ? json(*job.failure.stall_warn_s) : json(nullptr)}};
  j["status_file"] = job.status_file;
  return j;
}

namespace {

struct Assignment {
  std::string text;  // "KEY=VALUE" as given
  std::string key;
  json value;
};

[[noreturn]] void reject(const std::string& assignments, const std::string& reason) {
  throw InvalidArgument(fmt::format("--set {}: {}", assignments, reason));
}

Assignment split_assignment(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    reject(text, "expected KEY=VALUE with a dotted key, e.g. optimizer.lr=0.1 or roles.trainers=[0,1]");
  }
  Assignment a{text, text.substr(0, eq), {}};
  // The key may name a free-form section (model.args), where it would become a key of the job's JSON.
  if (!job_detail::valid_utf8(a.key)) reject("KEY=VALUE", "the key is not valid UTF-8");
  try {
    a.value = job_detail::parse_yaml(text.substr(eq + 1), "value").value;
  } catch (const InvalidArgument& e) {
    reject(text, fmt::format("{}: the value is not valid YAML ({})", a.key, e.what()));
  }
  return a;
}

// The assignment an error of `key` is about: the one that set that key, or one of its sections or keys
// inside it; else every assignment (a check across keys, such as fsdp.enabled against ddp.mode).
std::string blame(const std::vector<Assignment>& all, const std::string& key) {
  for (const Assignment& a : all) {
    if (a.key == key || key.rfind(a.key + ".", 0) == 0 || a.key.rfind(key + ".", 0) == 0) return a.text;
  }
  std::string joined;
  for (const Assignment& a : all) joined += (joined.empty() ? "" : " --set ") + a.text;
  return joined;
}

}  // namespace

void apply_overrides(JobSpec& job, const std::vector<std::string>& assignments) {
  if (assignments.empty()) return;
  std::vector<Assignment> all;
  for (const std::string& text : assignments) all.push_back(split_assignment(text));
  try {
    json tree = to_json(job);
    // A derived status file follows a new name; one the job set stays.
    const bool default_status =
        job.status_file == (job_dir(job) / (".braid-status-" + job.name)).lexically_normal().string();
    for (const Assignment& a : all) {
      try {
        find_slot(tree, a.key) = a.value;
      } catch (const job_detail::JobError& e) {
        reject(a.text, e.key.empty() ? e.what() : fmt::format("{}: {}", e.key, e.what()));
      }
      if (a.key == "name" && default_status) tree.erase("status_file");
    }
    job = job_detail::parse_tree(tree, job.file, job_dir(job).string());
  } catch (const job_detail::JobError& e) {
    reject(blame(all, e.key), e.key.empty() ? e.what() : fmt::format("{}: {}", e.key, e.what()));
  }
}

void apply_override(JobSpec& job, const std::string& assignment) { apply_overrides(job, {assignment}); }

}  // namespace braid::runtime
