// Job files (runtime/job/job_spec.h): defaults, every section, the forms of roles, every kind of rejection
// with the words of its message (file, line, key, reason), `--set` overrides and the round trip through
// to_json. Jobs are written inline; the ones that need files on disk are under tests/fixtures/jobs/.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "runtime/job/job_spec.h"
#include "tests/support/error_of.h"

using namespace braid;
using braid::testing::error_of;
using namespace braid::runtime;
using Catch::Matchers::Contains;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(__FILE__).parent_path() / "../../fixtures/jobs";

std::string fixture(const std::string& name) { return (kFixtures / name).lexically_normal().string(); }

JobSpec parse(const std::string& yaml) { return parse_job_text(yaml, "job.yaml", "/jobs"); }

std::string parse_error(const std::string& yaml) {
  return error_of([&] { parse(yaml); });
}

const char* kMinimal = "roles: {trainers: 2}\nmodel: {kind: mlp}\n";

}  // namespace

TEST_CASE("a minimal job gets every default", "[job]") {
  const JobSpec job = parse(kMinimal);
  CHECK(job.file == "job.yaml");
  CHECK(job.name == "job");  // the stem of the origin
  CHECK(job.backend == Backend::Gloo);
  CHECK(job.rpc.transport == RpcTransport::Auto);  // ucx when built with it, else tcp (issue 33)
  CHECK(to_json(job)["rpc"]["transport"] == "auto");
  CHECK(job.rpc.timeout_s == 60);
  CHECK(job.roles.trainers == std::vector<int>{0, 1});
  CHECK(job.roles.workers.empty());
  CHECK_FALSE(job.roles.master.has_value());
  CHECK(job.roles.world_size() == 2);
  CHECK(job.model.kind == "mlp");
  CHECK(job.model.args == nlohmann::json::object());
  CHECK(job.model.layers == nlohmann::json::array());
  CHECK(job.loss == LossKind::CrossEntropy);
  CHECK(job.data.kind == DataKind::Synthetic);
  CHECK(job.data.num_samples == 1024);
  CHECK(job.data.partition == Partition::Interleaved);
  CHECK(job.data.shuffle);
  CHECK(job.optimizer.kind == OptimizerKind::Sgd);
  CHECK(job.optimizer.lr == 0.01);
  CHECK(job.ddp.mode == DdpMode::Outside);
  CHECK(job.ddp.bucket_cap_mb == 25);
  CHECK_FALSE(job.fsdp.enabled);
  CHECK(job.train.epochs == 1);
  CHECK(job.train.steps == 0);
  CHECK(job.train.batch_size == 16);
  CHECK(job.checkpoint.dir.empty());
  CHECK(job.checkpoint.keep == 2);
  CHECK(job.log.level == "info");
  CHECK(job.log.metrics.empty());
  CHECK(job.failure.timeout_s == 60);
  CHECK_FALSE(job.failure.stall_warn_s.has_value());  // BRAID_STALL_WARN_S, else 60 s, decides
  CHECK(job.status_file == "/jobs/.braid-status-job");
}

TEST_CASE("rpc.transport is auto, tcp or ucx, and nothing else", "[job]") {
  CHECK(parse(std::string(kMinimal) + "rpc: {transport: auto}\n").rpc.transport == RpcTransport::Auto);
  CHECK(parse(std::string(kMinimal) + "rpc: {transport: tcp}\n").rpc.transport == RpcTransport::Tcp);
  CHECK(parse(std::string(kMinimal) + "rpc: {transport: ucx}\n").rpc.transport == RpcTransport::Ucx);
  CHECK(to_string(RpcTransport::Tcp) == "tcp");
  CHECK(to_string(RpcTransport::Ucx) == "ucx");
  CHECK_THROWS_WITH(parse(std::string(kMinimal) + "rpc: {transport: tensorpipe}\n"),
                    Contains("tensorpipe") && Contains("auto"));
}

TEST_CASE("YAML scalars keep their types in the model's arguments", "[job]") {
  // The parser does not know the model's arguments (the registry checks them), so it must not coerce them:
  // a quoted number stays a string.
  const JobSpec job = parse_job_text(
      "roles: {trainers: 1}\nmodel: {kind: mine, args: {n: 100, p: 0.5, on: true, label: \"7\", none: ~}}\n",
      "types.yaml", "/jobs");
  CHECK(job.model.args["n"].is_number_integer());
  CHECK(job.model.args["n"] == 100);
  CHECK(job.model.args["p"] == 0.5);
  CHECK(job.model.args["on"] == true);
  CHECK(job.model.args["label"] == "7");
  CHECK(job.model.args["none"].is_null());
}

TEST_CASE("every section of a full job file is read", "[job]") {
  const JobSpec job = parse_job_file(fixture("hybrid.yaml"));
  const std::string dir = kFixtures.lexically_normal().string();
  CHECK(job.name == "hybrid");
  CHECK(job.roles.trainers == std::vector<int>{0, 1, 2, 3});
  CHECK(job.roles.workers == std::vector<int>{4});
  CHECK(job.roles.master == 5);
  CHECK(job.roles.world_size() == 6);
  CHECK(job.model.kind == "hybrid");
  CHECK(job.model.args["num_embeddings"] == 100);
  CHECK(job.model.args["sparse"] == true);
  CHECK(job.loss == LossKind::WeightedSum);
  CHECK(job.data.kind == DataKind::HybridExamples);
  CHECK(job.data.partition == Partition::Contiguous);
  CHECK(job.data.micro_batch == 2);
  CHECK(job.optimizer.lr == 0.05);
  CHECK(job.train.steps == 3);
  CHECK(job.train.batch_size == 4);
  // Paths resolve against the job file's directory.
  CHECK(std::filesystem::path(job.checkpoint.dir).is_absolute());
  CHECK(std::filesystem::path(job.checkpoint.dir) == std::filesystem::absolute(kFixtures / "ckpt").lexically_normal());
  CHECK(std::filesystem::path(job.log.metrics).filename() == "metrics.jsonl");
  CHECK(std::filesystem::path(job.status_file).filename() == ".braid-status-hybrid");
  CHECK_THAT(job.status_file, Contains("fixtures/jobs/"));
  (void)dir;
}

TEST_CASE("csv data needs an existing file, found relative to the job file", "[job]") {
  const JobSpec job = parse_job_file(fixture("csv.yaml"));
  CHECK(job.data.kind == DataKind::Csv);
  CHECK(std::filesystem::is_regular_file(job.data.path));
  CHECK(job.data.header);
  CHECK(job.data.feature_scale == 0.0625);
  CHECK(job.model.layers.size() == 3);
  CHECK(job.model.layers[0]["out"] == 4);
  CHECK(job.optimizer.kind == OptimizerKind::Adam);

  const std::string missing = error_of([] { parse_job_file(fixture("bad_missing_csv.yaml")); });
  CHECK_THAT(missing, Contains("bad_missing_csv.yaml:3: data.path: no such file"));
  CHECK_THAT(missing, Contains("no_such.csv"));
  CHECK_THAT(parse_error(std::string(kMinimal) + "data: {kind: csv}\n"), Contains("data.path: required for csv data"));
  CHECK_THAT(parse_error(std::string(kMinimal) + "data: {kind: synthetic, path: x.csv}\n"),
             Contains("data.path: only for csv and binary data"));
  CHECK_THAT(error_of([] { parse_job_file(fixture("no_such_job.yaml")); }), Contains("no_such_job.yaml: cannot read"));
}

TEST_CASE("roles come as rank lists, ranges or counts", "[job]") {
  SECTION("counts: trainers, then workers, then the master") {
    const JobSpec job = parse("roles: {trainers: 4, workers: 1, master: 1}\nmodel: {kind: m}\n");
    CHECK(job.roles.trainers == std::vector<int>{0, 1, 2, 3});
    CHECK(job.roles.workers == std::vector<int>{4});
    CHECK(job.roles.master == 5);
  }
  SECTION("lists and ranges, in any order") {
    const JobSpec job = parse("roles: {master: 0, workers: \"1-2\", trainers: [3, \"4-5\"]}\nmodel: {kind: m}\n");
    CHECK(job.roles.trainers == std::vector<int>{3, 4, 5});
    CHECK(job.roles.workers == std::vector<int>{1, 2});
    CHECK(job.roles.master == 0);
  }
  SECTION("a master given as false, or none, leaves the first trainer in charge") {
    CHECK_FALSE(parse("roles: {trainers: 3, master: false}\nmodel: {kind: m}\n").roles.master.has_value());
    CHECK_FALSE(parse("roles: {trainers: [0], master: ~}\nmodel: {kind: m}\n").roles.master.has_value());
  }
}

TEST_CASE("bad roles are rejected with the role and rank", "[job]") {
  const std::string model = "model: {kind: m}\n";
  CHECK_THAT(parse_error("roles: {trainers: [0, 1], workers: [1]}\n" + model),
             Contains("job.yaml:1: roles.workers: rank 1 is already a trainer"));
  CHECK_THAT(parse_error("roles: {trainers: [0, 0]}\n" + model), Contains("rank 0 is listed twice"));
  CHECK_THAT(parse_error("roles: {trainers: [0, 2]}\n" + model), Contains("roles: rank 1 has no role"));
  CHECK_THAT(parse_error("roles: {trainers: 0}\n" + model), Contains("roles.trainers: must be >= 1, got 0"));
  CHECK_THAT(parse_error("roles: {trainers: []}\n" + model), Contains("at least one trainer"));
  CHECK_THAT(parse_error("roles: {workers: [0]}\n" + model), Contains("roles.trainers: required"));
  CHECK_THAT(parse_error(model), Contains("roles: required"));
  CHECK_THAT(parse_error("roles: {trainers: \"3-1\"}\n" + model), Contains("the range '3-1' is empty"));
  CHECK_THAT(parse_error("roles: {trainers: \"a-b\"}\n" + model), Contains("is not a rank or a range"));
  CHECK_THAT(parse_error("roles: {trainers: [0, -1]}\n" + model),
             Contains("roles.trainers[1]: rank -1 is out of range"));
  // Digits past a long's range (found by fuzz_job_yaml: std::stol threw out of the parser).
  CHECK_THAT(parse_error("roles: {trainers: \"4-100000000001290273005\"}\n" + model),
             Contains("roles.trainers: rank 100000000001290273005 is out of range (at most 1048575)"));
  CHECK_THAT(parse_error("roles: {trainers: [\"99999999999999999999999\"]}\n" + model),
             Contains("roles.trainers[0]: rank 99999999999999999999999 is out of range"));
  CHECK_THAT(parse_error("roles: {trainers: 2, workers: [2]}\n" + model),
             Contains("roles.workers: roles.trainers is a count, so workers must be a count too"));
  CHECK_THAT(parse_error("roles: {trainers: [0], workers: 1}\n" + model),
             Contains("roles.workers: roles.trainers is a rank list, so workers must be one too"));
  CHECK_THAT(parse_error("roles: {trainers: 2, master: 5}\n" + model),
             Contains("roles.master: roles.trainers is a count"));
}

TEST_CASE("unknown keys are rejected with the closest known key", "[job]") {
  const std::string err = error_of([] { parse_job_file(fixture("bad_unknown_key.yaml")); });
  CHECK_THAT(err, Contains("bad_unknown_key.yaml:5: train.batchsize: unknown key; did you mean 'batch_size'?"));
  CHECK_THAT(parse_error(std::string(kMinimal) + "optimiser: {lr: 0.1}\n"),
             Contains("job.yaml:3: optimiser: unknown key; did you mean 'optimizer'?"));
  // Nothing close: the known keys are listed instead.
  const std::string far = parse_error(std::string(kMinimal) + "zzz: 1\n");
  CHECK_THAT(far, Contains("zzz: unknown key (known keys: name, backend"));
  CHECK_THAT(parse_error("roles: {trainers: 1, trainer: 2}\nmodel: {kind: m}\n"),
             Contains("roles.trainer: unknown key; did you mean 'trainers'?"));
  CHECK_THAT(parse_error(std::string(kMinimal) + "log:\n  level: info\n  levle: debug\n"),
             Contains("job.yaml:5: log.levle"));
}

TEST_CASE("values of the wrong type or out of range are rejected with the key and line", "[job]") {
  auto with = [](const std::string& extra) { return parse_error(std::string(kMinimal) + extra); };
  CHECK_THAT(with("train:\n  epochs: 1\n  batch_size: four\n"),
             Contains("job.yaml:5: train.batch_size: expected an integer, got the string \"four\""));
  CHECK_THAT(with("train: {batch_size: 0}\n"), Contains("job.yaml:3: train.batch_size: must be >= 1, got 0"));
  CHECK_THAT(with("train: {batch_size: 2.5}\n"), Contains("expected an integer, got the number 2.5"));
  CHECK_THAT(with("train: {epochs: 0}\n"), Contains("train.epochs: must be >= 1"));
  CHECK_THAT(with("train: {steps: -1}\n"), Contains("train.steps: must be >= 0"));
  CHECK_THAT(with("optimizer: {lr: 0}\n"), Contains("optimizer.lr: must be a finite number > 0, got 0"));
  CHECK_THAT(with("optimizer: {lr: -0.1}\n"), Contains("optimizer.lr: must be a finite number > 0"));
  CHECK_THAT(with("optimizer: {lr: .inf}\n"), Contains("optimizer.lr: must be a finite number > 0"));
  CHECK_THAT(with("optimizer: {momentum: 1}\n"), Contains("optimizer.momentum: must be in [0, 1)"));
  CHECK_THAT(with("optimizer: {kind: adagrad}\n"),
             Contains("optimizer.kind: 'adagrad' is not one of none, sgd, adam, adamw"));
  CHECK_THAT(with("backend: glo\n"), Contains("backend: 'glo' is not one of mpi, gloo, nccl; did you mean 'gloo'?"));
  CHECK_THAT(with("ddp: {mode: sideways}\n"), Contains("ddp.mode: 'sideways' is not one of none, inside, outside"));
  CHECK_THAT(with("ddp: {static_graph: yes}\n"),
             Contains("ddp.static_graph: expected true or false, got the string \"yes\""));
  CHECK_THAT(with("train: 5\n"), Contains("train: expected a mapping of keys (epochs, steps"));
  CHECK_THAT(with("log: {level: loud}\n"), Contains("log.level: 'loud' is not one of trace, debug"));
  CHECK_THAT(with("failure: {timeout_s: 5, heartbeat_s: 10}\n"), Contains("failure.heartbeat_s: must be shorter"));
  CHECK_THAT(with("failure: {stall_warn_s: -1}\n"), Contains("failure.stall_warn_s: must be in [0, 604800] seconds"));
  CHECK_THAT(with("failure: {max_restarts: -1}\n"), Contains("failure.max_restarts: must be >= 0"));
  CHECK_THAT(with("failure: {max_restarts: 1001}\n"), Contains("failure.max_restarts: must be <= 1000"));
  CHECK_THAT(with("failure: {backoff_s: -1}\n"), Contains("failure.backoff_s: must be in [0, 3600] seconds"));
  CHECK_THAT(with("failure: {stall_warn_s: 1e10}\n"), Contains("failure.stall_warn_s: must be in [0, 604800] seconds"));
  CHECK_THAT(with("checkpoint: {interval: 5}\n"),
             Contains("checkpoint.interval: checkpoints every K steps need checkpoint.dir"));
  CHECK_THAT(with("fsdp: {param_dtype: float64}\n"), Contains("fsdp.param_dtype: 'float64' is not one of float16"));
  CHECK_THAT(with("name: \"bad name\"\n"), Contains("name: 'bad name' is not a job name"));
  CHECK_THAT(with("data: {micro_batch: 3}\n"), Contains("data.micro_batch: must divide train.batch_size (16), got 3"));
  CHECK_THAT(with("train: {epochs: 1}\ntrain: {epochs: 2}\n"), Contains("job.yaml:4: train: the key is given twice"));
  CHECK_THAT(parse_error("roles: {trainers: 1}\nmodel: {kind: sequential}\n"),
             Contains("model.layers: required for kind sequential"));
  CHECK_THAT(parse_error("roles: {trainers: 1}\nmodel: {kind: mlp, layers: [{kind: relu}]}\n"),
             Contains("model.layers: only for kind sequential"));
  CHECK_THAT(parse_error("roles: {trainers: 1}\nmodel: {args: {}}\n"), Contains("model.kind: required"));
  CHECK_THAT(parse_error("roles: [1, 2\n"), Contains("job.yaml:2:1: invalid YAML"));
  CHECK_THAT(parse_error("- a\n- b\n"), Contains("job.yaml: a job is a mapping of keys"));
}

TEST_CASE("optimizer none needs no learning rate", "[job]") {
  const JobSpec job = parse(std::string(kMinimal) + "optimizer: {kind: none, lr: 0}\n");
  CHECK(job.optimizer.kind == OptimizerKind::None);
  CHECK(job.optimizer.lr == 0);
}

TEST_CASE("fsdp excludes ddp inside and outside", "[job]") {
  CHECK_THAT(parse_error(std::string(kMinimal) + "fsdp: {enabled: true}\n"),
             Contains("job.yaml:3: fsdp.enabled: FSDP and DDP both reduce the trainers' gradients; with fsdp.enabled "
                      "set ddp.mode: none (it is 'outside')"));
  const JobSpec job =
      parse(std::string(kMinimal) +
            "ddp: {mode: none}\nfsdp: {enabled: true, sharding_strategy: shard_grad_op, wrap: [layers.0],"
            " param_dtype: bfloat16}\n");
  CHECK(job.fsdp.enabled);
  CHECK(job.fsdp.sharding_strategy == ShardingStrategy::ShardGradOp);
  CHECK(job.fsdp.wrap == std::vector<std::string>{"layers.0"});
  CHECK(job.fsdp.param_dtype == "bfloat16");
  CHECK_FALSE(job.fsdp.reduce_dtype.has_value());
}

TEST_CASE("overrides (--set KEY=VALUE) change one key with the same checks", "[job]") {
  JobSpec job = parse_job_file(fixture("hybrid.yaml"));
  apply_override(job, "optimizer.lr=0.1");
  CHECK(job.optimizer.lr == 0.1);
  apply_override(job, "optimizer.kind=none");
  CHECK(job.optimizer.kind == OptimizerKind::None);
  apply_override(job, "ddp.mode=inside");
  CHECK(job.ddp.mode == DdpMode::Inside);
  apply_override(job, "data.uneven=true");
  CHECK(job.data.uneven);
  apply_override(job, "roles={trainers: [0, 1], workers: [2], master: 3}");
  CHECK(job.roles.world_size() == 4);
  CHECK(job.roles.master == 3);
  apply_override(job, "roles={trainers: 3, workers: 1}");
  CHECK(job.roles.trainers == std::vector<int>{0, 1, 2});
  CHECK(job.roles.workers == std::vector<int>{3});
  CHECK_FALSE(job.roles.master.has_value());
  apply_override(job, "model.args.embedding_dim=32");
  apply_override(job, "model.args.new_arg=\"x\"");
  CHECK(job.model.args["embedding_dim"] == 32);
  CHECK(job.model.args["new_arg"] == "x");
  apply_override(job, "checkpoint.dir=other");
  CHECK(std::filesystem::path(job.checkpoint.dir) == std::filesystem::absolute(kFixtures / "other").lexically_normal());
  apply_override(job, "name=renamed");
  CHECK(std::filesystem::path(job.status_file).filename() == ".braid-status-renamed");

  const nlohmann::json before = to_json(job);
  CHECK_THAT(error_of([&] { apply_override(job, "train.batchsize=4"); }),
             Contains("--set train.batchsize=4: train.batchsize: unknown key; did you mean 'batch_size'?"));
  CHECK_THAT(error_of([&] { apply_override(job, "train.batch_size=0"); }),
             Contains("--set train.batch_size=0: train.batch_size: must be >= 1, got 0"));
  CHECK_THAT(error_of([&] { apply_override(job, "optimizer.lr=fast"); }), Contains("optimizer.lr: expected a number"));
  CHECK_THAT(error_of([&] { apply_override(job, "roles.workers=[0]"); }), Contains("rank 0 is already a trainer"));
  CHECK_THAT(error_of([&] {
               apply_override(job, "ddp.mode=outside");
               apply_override(job, "fsdp.enabled=true");
             }),
             Contains("--set fsdp.enabled=true: fsdp.enabled: FSDP and DDP"));
  CHECK_THAT(error_of([&] { apply_override(job, "optimizer.lr"); }), Contains("expected KEY=VALUE"));
  CHECK_THAT(error_of([&] { apply_override(job, "=3"); }), Contains("expected KEY=VALUE"));
  CHECK_THAT(error_of([&] { apply_override(job, "optimizer.lr=[1"); }), Contains("not valid YAML"));
  CHECK_THAT(error_of([&] { apply_override(job, "train.epochs.x=1"); }),
             Contains("train.epochs: is the number 1, so it has no key 'x'"));
  CHECK_THAT(error_of([&] { apply_override(job, "data.path=missing.csv"); }),
             Contains("data.path: only for csv and binary"));
  // A rejected override leaves the job as it was (ddp.mode=outside above was a good one).
  nlohmann::json expected = before;
  expected["ddp"]["mode"] = "outside";
  CHECK(to_json(job) == expected);
}

TEST_CASE("to_json holds every key and parses back to the same job", "[job]") {
  for (const char* name : {"hybrid.yaml", "csv.yaml", "minimal.yaml"}) {
    const JobSpec job = parse_job_file(fixture(name));
    const nlohmann::json j = to_json(job);
    for (const char* key : {"name", "backend", "device", "devices", "rpc", "roles", "model", "loss", "data",
                            "optimizer", "ddp", "fsdp", "train", "checkpoint", "log", "failure", "status_file"}) {
      CHECK(j.contains(key));
    }
    CHECK(j["train"]["batch_size"].is_number_integer());
    CHECK(j["log"]["metrics"].is_string());
    // JSON is YAML: the dump parses as a job file, from any directory, and gives the same job back.
    const JobSpec again = parse_job_text(j.dump(), "copy.yaml", "/elsewhere");
    CHECK(to_json(again) == j);
  }
  // failure.stall_warn_s, set, survives the round trip (unset, it is null and stays unset).
  const JobSpec stall = parse(std::string(kMinimal) + "failure: {stall_warn_s: 2.5}\n");
  REQUIRE(stall.failure.stall_warn_s.has_value());
  CHECK(*stall.failure.stall_warn_s == 2.5);
  CHECK(to_json(parse(to_json(stall).dump())) == to_json(stall));
  // The edges of the value types survive too: the largest seed, nulls and nested values in model.args.
  const JobSpec edge = parse(
      "roles: {trainers: 2}\n"
      "train: {seed: 18446744073709551615}\n"
      "fsdp: {reduce_dtype: float16}\n"
      "model: {kind: mlp, args: {sizes: [4, 8], none: ~, nested: {a: \"1\", b: 1e-3}}}\n");
  CHECK(edge.train.seed == UINT64_MAX);
  CHECK(edge.model.args["nested"]["b"] == 1e-3);
  const nlohmann::json j = to_json(edge);
  CHECK(to_json(parse_job_text(j.dump(), "copy.yaml", "/elsewhere")) == j);
}

TEST_CASE("check_world_size compares the roles with the launcher's world", "[job]") {
  const JobSpec job = parse_job_file(fixture("hybrid.yaml"));
  CHECK_NOTHROW(check_world_size(job, 6));
  const std::string err = error_of([&] { check_world_size(job, 4); });
  CHECK_THAT(err, Contains("hybrid.yaml: roles: the job's roles name 6 rank(s) (4 trainer(s), 1 worker(s), 1 master) "
                           "but the launcher started 4"));
  JobSpec gap = job;
  gap.roles.master = 7;
  CHECK_THAT(error_of([&] { check_world_size(gap, 6); }), Contains("must name ranks 0..5 once each"));
}

TEST_CASE("enum names are the job file's words", "[job]") {
  CHECK(to_string(Backend::Nccl) == "nccl");
  CHECK(to_string(DdpMode::Inside) == "inside");
  CHECK(to_string(LossKind::CrossEntropy) == "cross_entropy");
  CHECK(to_string(OptimizerKind::AdamW) == "adamw");
  CHECK(to_string(DataKind::HybridExamples) == "hybrid_examples");
  CHECK(to_string(ShardingStrategy::HybridShard) == "hybrid_shard");
}

TEST_CASE("several overrides are checked together, and an error names the one it is about", "[job]") {
  const JobSpec original = parse_job_text(
      "roles: {trainers: 4}\nmodel: {kind: mlp}\nddp: {mode: none}\nfsdp: {enabled: true}\n", "fsdp.yaml", "/jobs");
  // One at a time, hybrid_shard without its group size is refused, and the size without hybrid_shard too.
  JobSpec job = original;
  CHECK_THROWS_WITH(apply_override(job, "fsdp.sharding_strategy=hybrid_shard"),
                    Contains("--set fsdp.sharding_strategy=hybrid_shard: fsdp.shard_group_size: hybrid_shard needs"));
  CHECK(job.fsdp.sharding_strategy == ShardingStrategy::FullShard);
  // Together they are one consistent change.
  apply_overrides(job, {"fsdp.sharding_strategy=hybrid_shard", "fsdp.shard_group_size=2", "train.steps=5"});
  CHECK(job.fsdp.sharding_strategy == ShardingStrategy::HybridShard);
  CHECK(job.fsdp.shard_group_size == 2);
  CHECK(job.train.steps == 5);
  // A bad value among several: the error names that assignment, and nothing changes.
  JobSpec unchanged = original;
  CHECK_THROWS_WITH(apply_overrides(unchanged, {"train.steps=5", "train.batch_size=0"}),
                    Contains("--set train.batch_size=0: train.batch_size: must be >= 1, got 0"));
  CHECK(unchanged.train.steps == original.train.steps);
  // A size that does not divide the trainers.
  CHECK_THROWS_WITH(apply_overrides(unchanged, {"fsdp.sharding_strategy=hybrid_shard", "fsdp.shard_group_size=3"}),
                    Contains("dividing the 4 trainers") && Contains("got 3"));
  // An unknown key among several is named alone.
  CHECK_THROWS_WITH(apply_overrides(unchanged, {"train.steps=5", "train.stepz=1"}),
                    Contains("--set train.stepz=1: train.stepz: unknown key"));
}
