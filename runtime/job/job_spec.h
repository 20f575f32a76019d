// A training job as its YAML job file describes it (docs/JOBS.md is the reference of every key).
//
//   name: hybrid                      # default: the file's stem
//   backend: gloo                     # mpi | gloo | nccl: the default process group and DDP/FSDP's
//   device: cpu                       # cpu | cuda; per role: devices: {trainers: cuda, workers: cpu}
//   rpc: {transport: auto, timeout_s: 60}
//   roles: {trainers: [0, 1, 2, 3], workers: [4], master: 5}   # or counts: {trainers: 4, workers: 1, master: 1}
//   plugins: [libmy_losses.so]        # shared libraries that register models, losses, data kinds, comm hooks
//   model: {kind: hybrid, args: {...}}                        # or {kind: sequential, layers: [...]}
//                                     # + plugin: libmy_net.so, init_from: weights.safetensors, strict: true
//   loss: weighted_sum                # cross_entropy | mse | weighted_sum (sum(output * target), taken literally),
//                                     # or a loss a plugin registers
//   data: {kind: hybrid_examples, partition: contiguous, uneven: false}
//   optimizer: {kind: sgd, lr: 0.05}
//   ddp: {mode: outside}              # none | inside | outside; comm_hook: fp16_compress (or {kind, args})
//   train: {epochs: 1, steps: 0, batch_size: 4, seed: 0}
//   checkpoint: {dir: ckpt, interval: 10}
//   log: {level: info, interval: 10, metrics: metrics.jsonl}
//
// parse_job_file() reads and validates a file; every error is an InvalidArgument that names the file, the
// key (dotted: "optimizer.lr") and the reason, and unknown keys are errors too. apply_override() applies one
// `--set KEY=VALUE` with the same checks. Paths in the file are relative to the file's directory and are
// stored resolved (absolute).
//
// Roles are checked against the world size only at run time (check_world_size), since `braid check` runs
// outside any launcher.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid::runtime {

enum class Backend { Mpi, Gloo, Nccl };
// Auto: ucx when braid was built with UCX, else tcp (rpc/transport.h choose_transport).
enum class RpcTransport { Auto, Tcp, Ucx };
enum class DdpMode { None, Inside, Outside };
// Registered: a loss a plugin registers, named by JobSpec::loss_name (runtime/models/loss.h).
enum class LossKind { CrossEntropy, Mse, WeightedSum, Registered };
enum class OptimizerKind { None, Sgd, Adam, AdamW };
// Registered: a data kind a plugin registers, named by DataSpec::kind_name (runtime/data/dataset_registry.h).
enum class DataKind { Synthetic, Csv, Binary, HybridExamples, Npy, Registered };
// interleaved: DistributedSampler's rank::num_replicas; contiguous: trainer t takes the t-th block.
enum class Partition { Interleaved, Contiguous };
enum class ShardingStrategy { FullShard, ShardGradOp, NoShard, HybridShard };
// Where a role computes. Cuda: each rank takes cuda:<its local rank> among the devices it sees
// (CUDA_VISIBLE_DEVICES applies), runtime/run/rank_device.h.
enum class DeviceKind { Cpu, Cuda };

// `device` (every computing role) and `devices` (per role, ahead of `device`). The master only drives
// the job and has no device; a driving first trainer computes on the trainers' device.
struct DevicesSpec {
  DeviceKind all = DeviceKind::Cpu;
  std::optional<DeviceKind> trainers;  // unset: `all`
  std::optional<DeviceKind> workers;   // unset: `all`
  DeviceKind trainer() const { return trainers.value_or(all); }
  DeviceKind worker() const { return workers.value_or(all); }
};

// Which ranks play which role. After parsing, the three are explicit rank lists (counts are expanded in
// order: trainers first, then workers, then the master), disjoint, and there is at least one trainer.
struct RolesSpec {
  std::vector<int> trainers;
  std::vector<int> workers;
  std::optional<int> master;  // none: the first trainer drives the job
  int world_size() const;     // how many ranks the roles name
};

struct RpcSpec {
  RpcTransport transport = RpcTransport::Auto;
  double timeout_s = 60;  // the default timeout of every RPC
};

struct ModelSpec {
  std::string kind;        // a registered model name (runtime/models/model_registry.h)
  nlohmann::json args;     // an object: the model's arguments, checked by its definition
  nlohmann::json layers;   // an array, for kind "sequential": [{kind: linear, in: 64, out: 32}, {kind: relu}]
  uint64_t init_seed = 0;  // parameters are drawn from a generator seeded with it, the same on every trainer
  // The plugin (a shared library, absolute after parsing) that registers `kind`; empty for a built-in kind
  // or one that a library of JobSpec::plugins registers (runtime/plugin/plugin.h).
  std::string plugin;
  // Initial weights from a safetensors file (absolute after parsing; empty: drawn from init_seed), loaded
  // into the trainer's module before DDP or FSDP wraps it. strict: the file must hold exactly the module's
  // state-dict keys (PyTorch's "Missing key(s)" / "Unexpected key(s)" otherwise).
  std::string init_from;
  bool strict = true;
};

struct DataSpec {
  DataKind kind = DataKind::Synthetic;
  // The kind as the file names it (for a registered kind, the registry's key), and data.args (an object,
  // registered kinds only).
  std::string kind_name = "synthetic";
  nlohmann::json args = nlohmann::json::object();
  // csv/binary: the training file and an optional held-out test file (absolute after parsing).
  std::string path;
  std::string test_path;
  // npy: the inputs (N, F, ...) and targets (N,) / (N, 1) .npy files, and optionally the test split's two
  // (both or neither); absolute after parsing.
  std::string inputs;
  std::string targets;
  std::string test_inputs;
  std::string test_targets;
  // csv: whether the first line is a header; the label column (negative counts from the end) and the
  // feature columns (empty: every other column; csv and binary only).
  bool header = false;
  int label_column = -1;
  std::vector<int> feature_columns;
  double feature_scale = 1.0;  // features are multiplied by it (e.g. 1/16 for the digits' 0..16 pixels)
  // synthetic: samples drawn from a fixed random teacher, with this seed.
  int64_t num_samples = 1024;
  int num_features = 16;
  int num_classes = 4;  // 0: regression targets
  uint64_t seed = 0;
  // sampling
  Partition partition = Partition::Interleaved;
  bool shuffle = true;     // reshuffled every epoch from (train.seed, epoch), identically on every trainer
  bool drop_last = false;  // false: pad with repeated samples to a multiple of the trainer count
  // Uneven inputs, as torch's test_backward_ddp_outside_uneven_inputs: each batch is split into
  // micro-batches of `micro_batch` rows, and the first half of the trainers keep only the first half of them
  // (DDP's join() then balances the collectives).
  bool uneven = false;
  int micro_batch = 0;  // 0: one micro-batch per batch
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct DdpSpec {
  DdpMode mode = DdpMode::Outside;
  double bucket_cap_mb = 25;
  bool gradient_as_bucket_view = false;
  bool find_unused_parameters = false;
  bool static_graph = false;
  // How DDP reduces each bucket (runtime/models/comm_hook_registry.h): empty for the default allreduce, a
  // built-in hook (allreduce, fp16_compress, bf16_compress, noop) or one a plugin registers, with its
  // arguments (an object).
  std::string comm_hook;
  nlohmann::json comm_hook_args = nlohmann::json::object();
};

struct FsdpSpec {
  bool enabled = false;  // exclusive with ddp.mode inside/outside
  ShardingStrategy sharding_strategy = ShardingStrategy::FullShard;
  std::vector<std::string> wrap;  // child module names (dotted) that become their own FSDP units
  // hybrid_shard: trainers per shard group, consecutive in roles.trainers (e.g. the trainers of one node);
  // the trainers at the same place in each group replicate each other. Required there, dividing the
  // trainer count; 0 elsewhere.
  int shard_group_size = 0;
  std::optional<std::string> param_dtype;   // "float16" | "bfloat16" | "float32"
  std::optional<std::string> reduce_dtype;
};

struct TrainSpec {
  int epochs = 1;
  int64_t steps = 0;     // the total steps, through as many epochs as it takes (0: every step of every epoch)
  int batch_size = 16;   // per trainer
  uint64_t seed = 0;     // shuffling and dropout
  int eval_every = 0;    // steps between evaluations on the test split (0: at the end of each epoch only)
};

struct CheckpointSpec {
  std::string dir;   // empty: no checkpoints (absolute after parsing)
  int interval = 0;  // steps between checkpoints (0: only on a signal and at the end)
  int keep = 2;      // how many complete checkpoints to keep
  // true: each rank copies its state to memory and writes it in the background while training goes on
  // (checkpoint_writer.h); the checkpoint is committed when every rank has written. false: the step
  // waits for the writes.
  bool async = true;
};

struct LogSpec {
  std::string level = "info";
  int interval = 10;       // steps between progress lines
  std::string metrics;     // metrics.jsonl path (absolute after parsing; empty: none)
};

struct FailureSpec {
  double timeout_s = 60;   // every rank exits within this bound after another rank dies or a role fails
  double heartbeat_s = 2;  // how often the driver and every rank check on each other
  double context_ttl_s = 300;  // a distributed-autograd context left by a dead trainer is swept after it
  // The collectives' stall watchdog warns about an op that has waited this long (0: off). Unset:
  // BRAID_STALL_WARN_S, else 60 (collectives/queue/health_monitor.h).
  std::optional<double> stall_warn_s;
  // Under `braid launch`: a job whose rank failed is started again, from its latest complete checkpoint,
  // at most this many times (--max-restarts overrides), each restart after backoff_s.
  int max_restarts = 0;
  double backoff_s = 1;
};

struct JobSpec {
  std::string file;  // the job file's path as given ("" for a job made in code)
  std::string name;
  // The trainers' group's backend for CPU trainers (DDP and FSDP reduce over it) and the default group's.
  // nccl needs CUDA trainers; CUDA trainers always reduce over nccl (trainers_backend()).
  Backend backend = Backend::Gloo;
  DevicesSpec devices;
  RpcSpec rpc;
  RolesSpec roles;
  ModelSpec model;
  // Shared libraries loaded before anything else (absolute after parsing), for what the job names besides
  // its model: losses, data kinds, comm hooks (model.plugin adds the model's own).
  std::vector<std::string> plugins;
  LossKind loss = LossKind::CrossEntropy;
  std::string loss_name = "cross_entropy";  // as the file names it; the registry's key for LossKind::Registered
  DataSpec data;
  OptimizerSpec optimizer;
  DdpSpec ddp;
  FsdpSpec fsdp;
  TrainSpec train;
  CheckpointSpec checkpoint;
  LogSpec log;
  FailureSpec failure;
  std::string status_file;  // where the driver publishes its status endpoint (default: <file dir>/.braid-status-<name>)
};

// Reads and validates `path`. Throws InvalidArgument "<path>: <key>: <reason>" (with the line when known).
JobSpec parse_job_file(const std::string& path);
// The same from YAML text; `origin` names it in errors and `base_dir` resolves relative paths.
JobSpec parse_job_text(const std::string& yaml, const std::string& origin, const std::string& base_dir);

// Applies one "KEY=VALUE" (dotted key, YAML value: `optimizer.lr=0.1`, `roles.trainers=[0,1]`), then
// re-validates the whole job. Throws InvalidArgument "--set KEY=VALUE: <reason>" and leaves `job` unchanged.
void apply_override(JobSpec& job, const std::string& assignment);
// Several overrides at once, validated together after the last, so that keys that depend on each other
// can change together (`fsdp.sharding_strategy=hybrid_shard` with `fsdp.shard_group_size=2`). An error
// names the assignment it is about (every one, for a check across keys); `job` is unchanged on error.
void apply_overrides(JobSpec& job, const std::vector<std::string>& assignments);

// What the trainers' group reduces over: nccl when the trainers compute on CUDA, else `backend`.
Backend trainers_backend(const JobSpec& job);
// The default group over every rank (control messages, CPU tensors of every role): `backend`, or gloo
// when that is nccl (NCCL cannot carry the CPU roles' tensors).
Backend world_backend(const JobSpec& job);

// InvalidArgument when the roles do not name exactly ranks 0..world_size-1.
void check_world_size(const JobSpec& job, int world_size);

// The job as JSON (every key, defaults included): `braid check --print`, and the copy kept with checkpoints.
nlohmann::json to_json(const JobSpec& job);

// Names as the job file writes them ("gloo", "outside", "cross_entropy", ...).
std::string to_string(Backend v);
std::string to_string(DdpMode v);
std::string to_string(LossKind v);
std::string to_string(OptimizerKind v);
std::string to_string(DataKind v);
std::string to_string(ShardingStrategy v);
std::string to_string(RpcTransport v);
std::string to_string(DeviceKind v);

}  // namespace braid::runtime
