// Job file → JobSpec: one function per section, in the order of docs/JOBS.md, then the checks that span
// sections. Every failure is a JobError with the dotted key; the entry points that read YAML (job_file.cc)
// add the file and the line.
#include "runtime/job/job_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <regex>

#include "base/env.h"
#include "base/error.h"
#include "runtime/job/job_fields.h"
#include "runtime/job/yaml_tree.h"

namespace braid::runtime {
namespace job_detail {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void require_positive(double v, const std::string& key) {
  if (!(v > 0) || std::isinf(v)) fail(key, fmt::format("must be a finite number > 0, got {}", v));
}

// Every duration of a job (rpc.timeout_s, failure.*_s) is checked here, where it is read, so that
// `braid check` refuses what would otherwise overflow or expire at once on every rank at run time.
void require_duration(double v, const std::string& key) {
  const std::string error = env::seconds_range_error(v);
  if (!error.empty()) fail(key, error);
}

void require_unit_interval(double v, const std::string& key) {
  if (!(v >= 0 && v < 1)) fail(key, fmt::format("must be in [0, 1), got {}", v));
}

class Parser {
 public:
  Parser(const std::string& origin, const std::string& base_dir)
      : origin_(origin), base_(fs::absolute(base_dir.empty() ? fs::path(".") : fs::path(base_dir))) {}

  JobSpec parse(const json& root) {
    if (!root.is_object()) {
      fail("", fmt::format("a job is a mapping of keys (name, roles, model, ...), got {}", describe(root)));
    }
    Fields top(root, "",
               {"name", "backend", "device", "devices", "rpc", "roles", "plugins", "model", "loss", "data", "optimizer",
                "ddp", "fsdp",
                "train", "checkpoint", "log", "failure", "status_file"});
    JobSpec job;
    job.file = origin_;
    job.name = default_name();
    top.read("name", job.name);
    static const std::regex kName{"[A-Za-z0-9][A-Za-z0-9._-]*"};
    if (!std::regex_match(job.name, kName)) {
      fail("name", fmt::format("'{}' is not a job name: use letters, digits, '.', '_' and '-' (it names the "
                               "status file)",
                               job.name));
    }
    top.read_enum<Backend>("backend", job.backend,
                           {{"mpi", Backend::Mpi}, {"gloo", Backend::Gloo}, {"nccl", Backend::Nccl}});
    job.devices = parse_devices(top);
    check_backend_device(job);
    rpc(top.raw("rpc"), job.rpc);
    job.roles = parse_roles(top.raw("roles"));
    job.plugins = plugins(top.raw("plugins"));
    model(top.raw("model"), job.model);
    loss(top, job);
    train(top.raw("train"), job.train);  // before data: data.micro_batch is checked against the batch size
    data(top.raw("data"), job.data, job.train);
    optimizer(top.raw("optimizer"), job.optimizer);
    ddp(top.raw("ddp"), job.ddp);
    fsdp(top.raw("fsdp"), job.fsdp);
    if (job.fsdp.enabled && job.ddp.mode != DdpMode::None) {
      fail("fsdp.enabled", fmt::format("FSDP and DDP both reduce the trainers' gradients; with fsdp.enabled "
                                       "set ddp.mode: none (it is '{}')",
                                       to_string(job.ddp.mode)));
    }
    check_shard_groups(job);
    checkpoint(top.raw("checkpoint"), job.checkpoint);
    log(top.raw("log"), job.log);
    failure(top.raw("failure"), job.failure);
    top.read("status_file", job.status_file);
    job.status_file = job.status_file.empty() ? (base_ / (".braid-status-" + job.name)).lexically_normal().string()
                                              : resolve(job.status_file);
    return job;
  }

 private:
  // The file's stem, made a valid name ("my job.yaml" → "my_job"); "job" for text without a file name.
  std::string default_name() const {
    std::string name;
    for (char c : fs::path(origin_).stem().string()) {
      const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      if (ok || !name.empty()) name += ok ? c : '_';
    }
    return name.empty() ? "job" : name;
  }

  std::string resolve(const std::string& path) const {
    if (path.empty()) return path;
    return (base_ / path).lexically_normal().string();  // an absolute `path` replaces base_
  }

  void rpc(const json& value, RpcSpec& out) {
    Fields f(value, "rpc", {"transport", "timeout_s"});
    f.read_enum<RpcTransport>("transport", out.transport,
                              {{"auto", RpcTransport::Auto}, {"tcp", RpcTransport::Tcp}, {"ucx", RpcTransport::Ucx}});
    f.read("timeout_s", out.timeout_s);
    require_duration(out.timeout_s, f.path("timeout_s"));
  }


  std::vector<std::string> plugins(const json& value) const {
    std::vector<std::string> out;
    if (value.is_null()) return out;
    if (!value.is_array()) {
      fail("plugins", fmt::format("expected a list of shared libraries, e.g. [libmy_losses.so], got {}", describe(value)));
    }
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string key = fmt::format("plugins[{}]", i);
      if (!value[i].is_string() || value[i].get<std::string>().empty()) {
        fail(key, fmt::format("expected the path of a shared library, got {}", describe(value[i])));
      }
      // Whether the file exists is the plugin loader's check (runtime/plugin/plugin_loader.h), so that
      // `--set` can still name another library when the file's does not exist here.
      const std::string path = resolve(value[i].get<std::string>());
      if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
    }
    return out;
  }

  // A built-in loss by its enum; any other name is a loss a plugin registers, checked once plugins are
  // loaded (validate_job_extensions).
  void loss(const Fields& top, JobSpec& job) const {
    if (!top.has("loss")) return;
    top.read("loss", job.loss_name);
    if (job.loss_name.empty()) fail("loss", "must not be empty: cross_entropy, mse, weighted_sum or a plugin's loss");
    static const std::pair<const char*, LossKind> kBuiltin[] = {
        {"cross_entropy", LossKind::CrossEntropy}, {"mse", LossKind::Mse}, {"weighted_sum", LossKind::WeightedSum}};
    job.loss = LossKind::Registered;
    for (const auto& [name, kind] : kBuiltin) {
      if (job.loss_name == name) job.loss = kind;
    }
  }

  void model(const json& value, ModelSpec& out) {
    if (value.is_null()) fail("model", "required: the model to train, e.g. {kind: mlp, args: {...}}");
    Fields f(value, "model", {"kind", "args", "layers", "init_seed", "plugin", "init_from", "strict"});
    if (!f.has("kind")) fail("model.kind", "required: a registered model name, or sequential with model.layers");
    f.read("kind", out.kind);
    if (out.kind.empty()) fail("model.kind", "must not be empty");
    out.args = json::object();
    if (f.has("args")) {
      if (!f.raw("args").is_object()) {
        fail(f.path("args"),
             fmt::format("expected a mapping of the model's arguments, got {}", describe(f.raw("args"))));
      }
      out.args = f.raw("args");
    }
    out.layers = json::array();
    if (f.has("layers")) {
      const json& layers = f.raw("layers");
      if (!layers.is_array())
        fail(f.path("layers"), fmt::format("expected a list of layers, got {}", describe(layers)));
      for (size_t i = 0; i < layers.size(); ++i) {
        if (!layers[i].is_object()) {
          fail(fmt::format("model.layers[{}]", i),
               fmt::format("expected a mapping like {{kind: linear, in: 4, out: 2}}, got {}", describe(layers[i])));
        }
      }
      out.layers = layers;
    }
    if (out.kind == "sequential" && out.layers.empty()) {
      fail("model.layers", "required for kind sequential: a list like [{kind: linear, in: 4, out: 2}, {kind: relu}]");
    }
    if (out.kind != "sequential" && !out.layers.empty()) {
      fail("model.layers", fmt::format("only for kind sequential (kind is '{}')", out.kind));
    }
    f.read("init_seed", out.init_seed);
    // Existence is checked when they are used (the plugin loader, validate_job_model), after any --set.
    f.read("plugin", out.plugin);
    out.plugin = resolve(out.plugin);
    f.read("init_from", out.init_from);
    out.init_from = resolve(out.init_from);
    f.read("strict", out.strict);
  }

  // A built-in kind by its enum; any other name is a data kind a plugin registers (checked, with its args,
  // once plugins are loaded: validate_job_model). data.args belongs to such kinds only.
  static void data_kind(const Fields& f, DataSpec& out) {
    if (f.has("kind")) {
      f.read("kind", out.kind_name);
      static const std::pair<const char*, DataKind> kBuiltin[] = {{"synthetic", DataKind::Synthetic},
                                                                  {"csv", DataKind::Csv},
                                                                  {"binary", DataKind::Binary},
                                                                  {"npy", DataKind::Npy},
                                                                  {"hybrid_examples", DataKind::HybridExamples}};
      if (out.kind_name.empty()) fail(f.path("kind"), "must not be empty: synthetic, csv, binary, npy, "
                                                      "hybrid_examples or a plugin's data kind");
      out.kind = DataKind::Registered;
      for (const auto& [name, kind] : kBuiltin) {
        if (out.kind_name == name) out.kind = kind;
      }
    }
    if (out.kind != DataKind::Registered) out.kind_name = to_string(out.kind);
    out.args = json::object();
    if (f.has("args")) {
      if (out.kind != DataKind::Registered) {
        fail(f.path("args"), fmt::format("only for a data kind a plugin registers (data.kind is '{}')", out.kind_name));
      }
      if (!f.raw("args").is_object()) {
        fail(f.path("args"), fmt::format("expected a mapping of the data kind's arguments, got {}", describe(f.raw("args"))));
      }
      out.args = f.raw("args");
    }
  }

  void data(const json& value, DataSpec& out, const TrainSpec& train) {
    Fields f(value, "data",
             {"kind", "path", "test_path", "inputs", "targets", "test_inputs", "test_targets", "header", "label_column",
              "feature_columns", "feature_scale", "num_samples", "num_features", "num_classes", "seed", "partition",
              "shuffle", "drop_last", "uneven", "micro_batch", "args"});
    data_kind(f, out);
    const bool from_file = out.kind == DataKind::Csv || out.kind == DataKind::Binary;
    const bool npy = out.kind == DataKind::Npy;
    const std::pair<const char*, std::string*> files[] = {{"path", &out.path},
                                                          {"test_path", &out.test_path},
                                                          {"inputs", &out.inputs},
                                                          {"targets", &out.targets},
                                                          {"test_inputs", &out.test_inputs},
                                                          {"test_targets", &out.test_targets}};
    for (const auto& [key, path] : files) {
      f.read(key, *path);
      if (path->empty()) continue;
      const bool npy_key = path != &out.path && path != &out.test_path;
      if (!npy_key && !from_file)
        fail(f.path(key), fmt::format("only for csv and binary data (data.kind is '{}')", out.kind_name));
      if (npy_key && !npy)
        fail(f.path(key), fmt::format("only for npy data (data.kind is '{}')", out.kind_name));
      *path = resolve(*path);
      std::error_code ec;  // an unreadable directory on the way reads as "no such file", not as a crash
      if (!fs::is_regular_file(*path, ec)) fail(f.path(key), fmt::format("no such file: {}", *path));
    }
    if (from_file && out.path.empty()) {
      fail("data.path", fmt::format("required for {} data: the training file", to_string(out.kind)));
    }
    if (npy) {
      if (out.inputs.empty()) fail("data.inputs", "required for npy data: the .npy file of inputs (N, F, ...)");
      if (out.targets.empty()) fail("data.targets", "required for npy data: the .npy file of targets (N,)");
      if (out.test_inputs.empty() != out.test_targets.empty()) {
        const bool inputs_missing = out.test_inputs.empty();
        fail(inputs_missing ? "data.test_inputs" : "data.test_targets",
             fmt::format("required with data.{}: a test split needs both its inputs and its targets",
                         inputs_missing ? "test_targets" : "test_inputs"));
      }
    }
    f.read("header", out.header);
    f.read("label_column", out.label_column, INT32_MIN);
    if (f.has("feature_columns")) {
      const json& cols = f.raw("feature_columns");
      if (!cols.is_array())
        fail(f.path("feature_columns"), fmt::format("expected a list of column numbers, got {}", describe(cols)));
      out.feature_columns.clear();
      for (size_t i = 0; i < cols.size(); ++i) {
        const std::string key = fmt::format("data.feature_columns[{}]", i);
        const int64_t c = as_integer(cols[i], key);
        if (c < INT32_MIN || c > INT32_MAX) fail(key, fmt::format("column {} is out of range", c));
        out.feature_columns.push_back(static_cast<int>(c));
      }
      if (npy && !out.feature_columns.empty()) {
        fail(f.path("feature_columns"), "not for npy data: every value of an input row is a feature (select the "
                                        "columns when saving the file, e.g. np.save(path, x[:, cols]))");
      }
    }
    f.read("feature_scale", out.feature_scale);
    if (!std::isfinite(out.feature_scale) || out.feature_scale == 0) {
      fail(f.path("feature_scale"), fmt::format("must be a finite non-zero number, got {}", out.feature_scale));
    }
    f.read("num_samples", out.num_samples, 1);
    f.read("num_features", out.num_features, 1);
    f.read("num_classes", out.num_classes, 0);
    if (out.num_classes == 1) {
      fail(f.path("num_classes"), "must be 0 (regression targets) or at least 2 classes, got 1");
    }
    f.read("seed", out.seed);
    f.read_enum<Partition>("partition", out.partition,
                           {{"interleaved", Partition::Interleaved}, {"contiguous", Partition::Contiguous}});
    f.read("shuffle", out.shuffle);
    f.read("drop_last", out.drop_last);
    f.read("uneven", out.uneven);
    f.read("micro_batch", out.micro_batch, 0);
    if (out.micro_batch > 0 && train.batch_size % out.micro_batch != 0) {
      fail(f.path("micro_batch"),
           fmt::format("must divide train.batch_size ({}), got {}", train.batch_size, out.micro_batch));
    }
  }

  void optimizer(const json& value, OptimizerSpec& out) {
    Fields f(value, "optimizer", {"kind", "lr", "momentum", "weight_decay", "beta1", "beta2", "eps"});
    f.read_enum<OptimizerKind>("kind", out.kind,
                               {{"none", OptimizerKind::None},
                                {"sgd", OptimizerKind::Sgd},
                                {"adam", OptimizerKind::Adam},
                                {"adamw", OptimizerKind::AdamW}});
    f.read("lr", out.lr);
    if (out.kind != OptimizerKind::None) require_positive(out.lr, f.path("lr"));
    f.read("momentum", out.momentum);
    require_unit_interval(out.momentum, f.path("momentum"));
    f.read("weight_decay", out.weight_decay);
    if (!(out.weight_decay >= 0) || std::isinf(out.weight_decay)) {
      fail(f.path("weight_decay"), fmt::format("must be a finite number >= 0, got {}", out.weight_decay));
    }
    f.read("beta1", out.beta1);
    require_unit_interval(out.beta1, f.path("beta1"));
    f.read("beta2", out.beta2);
    require_unit_interval(out.beta2, f.path("beta2"));
    f.read("eps", out.eps);
    require_positive(out.eps, f.path("eps"));
  }

  void ddp(const json& value, DdpSpec& out) {
    Fields f(value, "ddp",
             {"mode", "bucket_cap_mb", "gradient_as_bucket_view", "find_unused_parameters", "static_graph",
              "comm_hook"});
    f.read_enum<DdpMode>("mode", out.mode,
                         {{"none", DdpMode::None}, {"inside", DdpMode::Inside}, {"outside", DdpMode::Outside}});
    f.read("bucket_cap_mb", out.bucket_cap_mb);
    require_positive(out.bucket_cap_mb, f.path("bucket_cap_mb"));
    f.read("gradient_as_bucket_view", out.gradient_as_bucket_view);
    f.read("find_unused_parameters", out.find_unused_parameters);
    f.read("static_graph", out.static_graph);
    comm_hook(f, out);
  }

  // ddp.comm_hook: a name, or {kind: NAME, args: {...}}; the name is checked once plugins are loaded.
  static void comm_hook(const Fields& ddp, DdpSpec& out) {
    if (!ddp.has("comm_hook")) return;
    const json& v = ddp.raw("comm_hook");
    out.comm_hook_args = json::object();
    if (v.is_string()) {
      out.comm_hook = v.get<std::string>();
    } else if (v.is_object()) {
      Fields h(v, "ddp.comm_hook", {"kind", "args"});
      h.read("kind", out.comm_hook);
      if (h.has("args")) {
        if (!h.raw("args").is_object()) {
          fail(h.path("args"), fmt::format("expected a mapping of the hook's arguments, got {}", describe(h.raw("args"))));
        }
        out.comm_hook_args = h.raw("args");
      }
    } else {
      fail("ddp.comm_hook", fmt::format("expected a hook name (allreduce, fp16_compress, ...) or {{kind: NAME, args: "
                                        "{{...}}}}, got {}", describe(v)));
    }
    if (out.comm_hook.empty()) fail("ddp.comm_hook", "the hook's name is empty");
  }

  // hybrid_shard's groups must tile the trainers; other strategies have none.
  void check_shard_groups(const JobSpec& job) {
    const int size = job.fsdp.shard_group_size;
    const auto trainers = static_cast<int>(job.roles.trainers.size());
    if (job.fsdp.sharding_strategy != ShardingStrategy::HybridShard) {
      if (size != 0) {
        fail("fsdp.shard_group_size", fmt::format("only hybrid_shard has shard groups (the strategy is '{}'); "
                                                  "leave it out", to_string(job.fsdp.sharding_strategy)));
      }
      return;
    }
    if (size < 1 || trainers % size != 0) {
      fail("fsdp.shard_group_size",
           fmt::format("hybrid_shard needs the trainers per shard group, dividing the {} trainers (e.g. the "
                       "trainers of one node), got {}", trainers, size));
    }
  }

  void fsdp(const json& value, FsdpSpec& out) {
    Fields f(value, "fsdp", {"enabled", "sharding_strategy", "wrap", "param_dtype", "reduce_dtype", "shard_group_size"});
    f.read("enabled", out.enabled);
    f.read_enum<ShardingStrategy>("sharding_strategy", out.sharding_strategy,
                                  {{"full_shard", ShardingStrategy::FullShard},
                                   {"shard_grad_op", ShardingStrategy::ShardGradOp},
                                   {"no_shard", ShardingStrategy::NoShard},
                                   {"hybrid_shard", ShardingStrategy::HybridShard}});
    f.read("shard_group_size", out.shard_group_size, 0);
    if (f.has("wrap")) {
      const json& wrap = f.raw("wrap");
      if (!wrap.is_array())
        fail(f.path("wrap"), fmt::format("expected a list of module names, got {}", describe(wrap)));
      out.wrap.clear();
      for (size_t i = 0; i < wrap.size(); ++i) {
        if (!wrap[i].is_string() || wrap[i].get<std::string>().empty()) {
          fail(fmt::format("fsdp.wrap[{}]", i), fmt::format("expected a module name, got {}", describe(wrap[i])));
        }
        out.wrap.push_back(wrap[i].get<std::string>());
      }
    }
    for (const char* key : {"param_dtype", "reduce_dtype"}) {
      std::optional<std::string>& dtype = std::string(key) == "param_dtype" ? out.param_dtype : out.reduce_dtype;
      if (!f.has(key)) continue;
      std::string text;
      f.read(key, text);
      if (text != "float16" && text != "bfloat16" && text != "float32") {
        fail(f.path(key), Fields::bad_choice(text, {"float16", "bfloat16", "float32"}));
      }
      dtype = text;
    }
  }

  void train(const json& value, TrainSpec& out) {
    Fields f(value, "train", {"epochs", "steps", "batch_size", "seed", "eval_every"});
    f.read("epochs", out.epochs, 1);
    f.read("steps", out.steps, 0);
    f.read("batch_size", out.batch_size, 1);
    f.read("seed", out.seed);
    f.read("eval_every", out.eval_every, 0);
  }

  void checkpoint(const json& value, CheckpointSpec& out) {
    Fields f(value, "checkpoint", {"dir", "interval", "keep", "async"});
    f.read("dir", out.dir);
    out.dir = resolve(out.dir);
    f.read("interval", out.interval, 0);
    f.read("keep", out.keep, 1);
    f.read("async", out.async);
    if (out.interval > 0 && out.dir.empty()) {
      fail(f.path("interval"), "checkpoints every K steps need checkpoint.dir (where to write them)");
    }
  }

  void log(const json& value, LogSpec& out) {
    Fields f(value, "log", {"level", "interval", "metrics"});
    f.read("level", out.level);
    const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "critical", "off"};
    if (std::find(levels.begin(), levels.end(), out.level) == levels.end()) {
      fail(f.path("level"), Fields::bad_choice(out.level, levels));
    }
    f.read("interval", out.interval, 1);
    f.read("metrics", out.metrics);
    out.metrics = resolve(out.metrics);
  }

  void failure(const json& value, FailureSpec& out) {
    Fields f(value, "failure", {"timeout_s", "heartbeat_s", "context_ttl_s", "stall_warn_s", "max_restarts", "backoff_s"});
    f.read("timeout_s", out.timeout_s);
    require_duration(out.timeout_s, f.path("timeout_s"));
    f.read("heartbeat_s", out.heartbeat_s);
    require_duration(out.heartbeat_s, f.path("heartbeat_s"));
    if (out.heartbeat_s >= out.timeout_s) {
      fail(f.path("heartbeat_s"),
           fmt::format("must be shorter than failure.timeout_s ({}), got {}", out.timeout_s, out.heartbeat_s));
    }
    f.read("context_ttl_s", out.context_ttl_s);
    require_duration(out.context_ttl_s, f.path("context_ttl_s"));
    f.read("max_restarts", out.max_restarts, 0, 1000);
    f.read("backoff_s", out.backoff_s);
    if (!(out.backoff_s >= 0 && out.backoff_s <= 3600)) {
      fail(f.path("backoff_s"), fmt::format("must be in [0, 3600] seconds, got {}", out.backoff_s));
    }
    // Unset (or null, as job_json writes an unset one) leaves BRAID_STALL_WARN_S in charge.
    if (value.is_object() && value.contains("stall_warn_s") && !value.at("stall_warn_s").is_null()) {
      double s = 0;
      f.read("stall_warn_s", s);
      if (!(s >= 0 && s <= 7 * 24 * 3600.0)) {
        fail(f.path("stall_warn_s"), fmt::format("must be in [0, 604800] seconds (0: no stall watchdog), got {}", s));
      }
      out.stall_warn_s = s;
    }
  }

  std::string origin_;
  fs::path base_;
};

}  // namespace

JobSpec parse_tree(const json& root, const std::string& origin, const std::string& base_dir) {
  return Parser(origin, base_dir).parse(root);
}

}  // namespace job_detail

}  // namespace braid::runtime
