#include "cli/bench_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/seconds_flag.h"

namespace braid::cli {

namespace {

void add_collectives_command(CLI::App& bench, bench::CollectivesBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "collectives",
      "Time one collective at a series of message sizes through braid's process group and, on the same "
      "buffers, through the raw engine under it (MPI_Allreduce & co., gloo's algorithms, ncclAllReduce & co.). "
      "Prints nccl-tests-style rows (size, count, type, time, algbw, busbw, #wrong) with the raw time, raw "
      "busbw and the ratio braid/raw, then a 'RESULT collectives ...' line per op. Run it under a launcher: "
      "mpirun -np 2 braid bench collectives --backend mpi (or an env:// job: RANK, WORLD_SIZE, MASTER_ADDR, "
      "MASTER_PORT). bench/README.md explains the method.");
  c->add_option("--backend", o.backend, "Engine of the braid group and of the raw reference")
      ->capture_default_str()
      ->check(CLI::IsMember({"mpi", "gloo", "nccl"}));
  c->add_option("-o,--op", o.ops, "allreduce, allgather, broadcast, reduce_scatter, alltoall, or all (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--sizes", o.sizes, "Message sizes in bytes: 4K..64M (multiplied by --factor), 4K,1M,16M or 1M")
      ->capture_default_str();
  c->add_option("-f,--factor", o.factor, "Step between sizes of a range")->capture_default_str();
  c->add_option("-d,--dtype", o.dtype, "float32, float64, int32, int64, float16 or bfloat16")->capture_default_str();
  c->add_option("-n,--iters", o.iters, "Timed calls per round and side (0: about --seconds-per-size per size)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--min-iters", o.min_iters,
                 "When --iters is 0: the least timed calls per round and side, however long a size takes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("-w,--warmup", o.warmup, "Untimed calls per side and size")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--rounds", o.rounds, "Alternating braid/raw rounds per size; each side's best round counts, and 'paired' is the median "
                 "over rounds of braid/raw within a round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--seconds-per-size", o.seconds_per_size, "Target time per size when --iters is 0")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_flag("!--no-raw", o.raw, "Skip the raw-engine reference");
  c->add_flag("--raw-nonblocking", o.raw_nonblocking,
              "mpi: time MPI_Iallreduce & co. + MPI_Wait as the reference (the calls braid's mpi engine makes)");
  c->add_flag("!--no-check", o.check, "Skip the #wrong check");
  c->add_flag("--poll-wait", o.poll_wait,
              "Diagnostic: wait for braid's ops by polling Work::is_completed() instead of blocking in wait()");
  c->add_option("--threads", o.threads, "gloo: lanes of the braid group")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--hierarchy", o.hierarchy,
                "Two-level collectives of the braid group (ranks on several hosts): auto (the policy's choice), on, off, "
                "or both (each op on a group with and one without, next to the same raw reference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off", "both"}));
  c->add_option("--init-method", o.init_method,
                "Rendezvous URL (env://, tcp://host:port, file:///path); default: mpirun's bootstrap, else env://");
  c->add_option("-T,--timeout", o.timeout_s, "Seconds per op and for connecting")->capture_default_str()->check(seconds_flag());
}

void add_rpc_command(CLI::App& bench, bench::RpcBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "rpc",
      "Time RPC calls from worker0 to worker1: rpc_sync latency (p50/p99) of an empty call and of a 64-byte "
      "tensor echo, echo throughput of 1 MiB and 16 MiB tensors, remote + to_here latency, and rpc_async calls/s "
      "with --in-flight calls outstanding, and the large echoes over a plain loopback TCP socket (the tcp transport's "
      "reference, printed as a ratio); prints a table with the issue's targets and a 'RESULT rpc ...' line per row. Run it as 2 processes: mpirun -np 2 braid bench rpc (or an env:// job: RANK, WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT). bench/run_rpc_bench.sh puts PyTorch's TensorPipe agent next to it.");
  c->add_option("--transport", o.transport, "RPC transport: auto (ucx when braid was built with it, else tcp), tcp or ucx")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tcp", "ucx"}));
  c->add_option("-n,--iters", o.iters, "Timed calls per latency row (empty, echo 64 B, remote + to_here)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--echo-iters", o.echo_iters, "Timed calls per large echo row (1 MiB, 16 MiB)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("-w,--warmup", o.warmup, "Untimed calls before each row (large echoes: at most 5)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--async-calls", o.async_calls, "Timed rpc_async calls")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--in-flight", o.in_flight, "rpc_async calls kept outstanding")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--threads", o.threads, "num_worker_threads of each agent")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--init-method", o.init_method,
                "Rendezvous URL (env://, tcp://host:port, file:///path); default: mpirun's bootstrap, else env://");
  c->add_option("-T,--timeout", o.timeout_s, "Seconds per call, for joining and for the graceful shutdown")
      ->capture_default_str()
      ->check(seconds_flag());
}

void add_dist_autograd_command(CLI::App& bench, bench::DistAutogradBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "dist-autograd",
      "Time the price of a backward pass that crosses processes. worker1 owns a Linear(FEATURES, FEATURES) "
      "with bias (an rpc class made by worker0 with rpc::remote); each distributed iteration on worker0 is "
      "{ dist_autograd::Context; out = rref.rpc_sync().call(\"forward\", {x}); dist_autograd::backward(ctx, "
      "{sum(out)}); get_gradients(ctx) } with x a (BATCH, FEATURES) float32 leaf that requires grad: x and out "
      "cross the wire forward, d out and d x backward, then the context is released on both workers. The local "
      "row runs the same model on worker0 with braid's autograd (linear, sum, grad of x, W, b). Both rows "
      "alternate, iteration by iteration; the gradients of both are checked equal first. Prints ms/iteration "
      "(mean, p50, min, max), each phase's mean (forward, backward, get_gradients, release), the ratio "
      "distributed / local against the issue's target (<= 1.15x), where the time goes (--timeline more "
      "iterations with timestamps on both workers: each transfer, each worker's compute, the replies, the "
      "release) and a 'RESULT dist_autograd ...' line per row. "
      "Run it as 2 processes: mpirun -np 2 --bind-to none braid bench dist-autograd (or an env:// job: RANK, "
      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT). bench/run_dist_autograd_bench.sh puts PyTorch's "
      "torch.distributed.autograd next to it.");
  c->add_option("--transport", o.transport, "RPC transport: auto (ucx when braid was built with it, else tcp), tcp or ucx")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tcp", "ucx"}));
  c->add_option("-n,--iters", o.iters, "Timed iterations per row")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("-w,--warmup", o.warmup, "Untimed iterations per row first")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--batch", o.batch, "Rows of x")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--features", o.features, "Features in and out of the Linear")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--threads", o.threads, "OpenBLAS threads of each process (PyTorch's side: torch.set_num_threads)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--rpc-threads", o.rpc_threads, "num_worker_threads of each agent")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--seed", o.seed, "Seed of the weights (x: seed + 1)")->capture_default_str();
  c->add_option("--timeline", o.timeline,
                "Distributed iterations traced after the timed rows, for where the time goes (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--init-method", o.init_method,
                "Rendezvous URL (env://, tcp://host:port, file:///path); default: mpirun's bootstrap, else env://");
  c->add_option("-T,--timeout", o.timeout_s, "Seconds per call, for joining and for the graceful shutdown")
      ->capture_default_str()
      ->check(seconds_flag());
}

void add_ddp_command(CLI::App& bench, bench::DdpBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "ddp",
      "Time a training step (zero_grad, forward, MSE loss, backward, SGD momentum step) of LAYERS x "
      "(Linear(WIDTH, WIDTH) + ReLU) on a (BATCH, WIDTH) float32 input per rank, through DistributedDataParallel "
      "and, alternating step by step, the same model without DDP on each rank. The DDP gradients are checked "
      "against one process's on the whole batch first (max |diff| printed). Prints ms per step (p50, mean, min, "
      "max and each phase), the ratio ddp / single against the issue's target (<= 1.25x), how much of the "
      "communication overlapped backward and when each bucket was launched, and a 'RESULT ddp ...' line. Run it "
      "as 2 processes: mpirun -np 2 --bind-to none braid bench ddp --backend gloo (or an env:// job: RANK, "
      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT). bench/run_ddp_bench.sh puts PyTorch's DDP next to it.");
  c->add_option("--backend", o.backend, "Engine of the DDP group")->capture_default_str()->check(CLI::IsMember({"mpi", "gloo"}));
  c->add_option("-n,--iters", o.iters, "Timed steps per row")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("-w,--warmup", o.warmup, "Untimed steps per row first")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--layers", o.layers, "Number of Linear+ReLU layers")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--width", o.width, "Features in and out of every layer")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--batch", o.batch, "Rows of the input of each rank")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--bucket-cap-mb", o.bucket_cap_mb, "DDP's bucket_cap_mb")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_flag("--gradient-as-bucket-view", o.gradient_as_bucket_view, "DDP's gradient_as_bucket_view");
  c->add_option("--comm-hook", o.comm_hook,
                "builtin (DDP's own averaging), or a built-in comm hook: allreduce, fp16, noop (no communication: "
                "the reducer's own cost; no gradient check)")
      ->capture_default_str()
      ->check(CLI::IsMember({"builtin", "allreduce", "noop", "fp16"}));
  c->add_option("--threads", o.threads, "OpenBLAS threads of each process")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--gloo-threads", o.gloo_threads, "gloo: lanes of the group")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--seed", o.seed, "Seed of the weights (input and target: seed + 1)")->capture_default_str();
  c->add_option("--init-method", o.init_method,
                "Rendezvous URL (env://, tcp://host:port, file:///path); default: mpirun's bootstrap, else env://");
  c->add_option("-T,--timeout", o.timeout_s, "Seconds for the rendezvous and per collective")
      ->capture_default_str()
      ->check(seconds_flag());
}

void add_fsdp_command(CLI::App& bench, bench::FsdpBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "fsdp",
      "Time one FSDP training step (forward, MSE loss, backward, SGD step) of LAYERS x Linear(WIDTH, WIDTH), "
      "each Linear its own unit, under each sharding strategy, and the resident memory forward adds on rank 0 "
      "(FULL_SHARD frees a layer's gathered weights after its forward; SHARD_GRAD_OP keeps them until "
      "backward; NO_SHARD never shards), and the peak bytes of parameters + gradients + optimizer state per rank. "
      "DDP and UNSHARDED run the same model for comparison. Prints a row and a 'RESULT fsdp ...' line per "
      "strategy. Run it under a "
      "launcher: mpirun -np 2 braid bench fsdp (or an env:// job: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).");
  c->add_option("--backend", o.backend, "Engine of the process group")
      ->capture_default_str()
      ->check(CLI::IsMember({"mpi", "gloo", "nccl"}));
  c->add_option("--layers", o.layers, "Number of Linear layers (units)")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--width", o.width, "Features in and out of every layer")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--batch", o.batch, "Rows of each rank's input")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--steps", o.steps, "Timed steps per strategy")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--warmup", o.warmup, "Untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--strategies", o.strategies,
                "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD; DDP and UNSHARDED (plain model, no communication) to compare "
                "(comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "DDP", "UNSHARDED"}));
  c->add_option("--optimizer", o.optimizer, "sgd (no state) or adam (two state tensors per parameter)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  c->add_option("--init-method", o.init_method,
                "Rendezvous URL (env://, tcp://host:port, file:///path); default: mpirun's bootstrap, else env://");
}

void add_trace_command(CLI::App& bench, bench::TraceBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "trace",
      "Time small allreduces on one group with nothing, the flight recorder, or the desync fingerprint check "
      "(BRAID_DEBUG=DETAIL) on, alternating in every round, and print each one's cost per op and ratio to the "
      "plain group, then the recorder alone. Two ranks: mpirun -np 2 braid bench trace.");
  c->add_option("--backend", o.backend, "Engine of the groups")->capture_default_str()->check(CLI::IsMember({"mpi", "gloo"}));
  c->add_option("--bytes", o.bytes, "Bytes per allreduce (float32)")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("-n,--iters", o.iters, "Timed ops per round and variant")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("-w,--warmup", o.warmup, "Untimed ops per variant")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--rounds", o.rounds, "Rounds")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--micro-iters", o.micro_iters, "Ops of the recorder-alone measurement")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--init-method", o.init_method,
                "Rendezvous URL (env://, tcp://host:port, file:///path); default: mpirun's bootstrap, else env://");
}

void add_checkpoint_command(CLI::App& bench, bench::CheckpointBenchOptions& o) {
  CLI::App* c = bench.add_subcommand(
      "checkpoint",
      "Time how long a checkpoint of SIZE MiB stalls a training loop when written synchronously and when "
      "copied to memory and written in the background (checkpoint.async), alternating in each round; prints "
      "the async stall over the sync write (goal: <= 0.10).");
  c->add_option("--size-mb", o.size_mb, "MiB of float32 state")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--tensors", o.tensors, "Tensors the state is split into")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--rounds", o.rounds, "Rounds (one checkpoint per variant each)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--step-ms", o.step_ms, "Length of one training step of the loop")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--threads", o.threads, "OpenBLAS threads of the training loop")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--dir", o.dir, "Where to write (default: a temporary directory, removed after)");
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* bench = app.add_subcommand("bench", "Run a built-in benchmark and print its timings");
  bench->require_subcommand(1);
  CLI::App* mlp = bench->add_subcommand(
      "mlp",
      "Time one training step (zero_grad, forward, MSE loss, backward, SGD momentum step) of an MLP of "
      "LAYERS x (Linear(WIDTH, WIDTH) + ReLU) on a [BATCH, WIDTH] float32 input. Prints the median step time "
      "and its phases; compare with PyTorch through bench/run_mlp_bench.sh.");
  auto& o = options.mlp;
  mlp->add_option("--layers", o.layers, "Number of Linear+ReLU layers")->capture_default_str()->check(CLI::PositiveNumber);
  mlp->add_option("--width", o.width, "Features in and out of every layer")->capture_default_str()->check(CLI::PositiveNumber);
  mlp->add_option("--batch", o.batch, "Rows of the input")->capture_default_str()->check(CLI::PositiveNumber);
  mlp->add_option("--steps", o.steps, "Timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  mlp->add_option("--warmup", o.warmup, "Untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  mlp->add_option("--threads", o.threads, "OpenBLAS threads")->capture_default_str()->check(CLI::PositiveNumber);
  add_collectives_command(*bench, options.collectives);
  add_rpc_command(*bench, options.rpc);
  add_dist_autograd_command(*bench, options.dist_autograd);
  add_ddp_command(*bench, options.ddp);
  add_fsdp_command(*bench, options.fsdp);
  add_trace_command(*bench, options.trace);
  add_checkpoint_command(*bench, options.checkpoint);
  return bench;
}

int run_bench_command(CLI::App& bench, const BenchOptions& options) {
  if (bench.get_subcommand("mlp")->parsed()) {
    fmt::print("{}", bench::format_mlp_bench(options.mlp, bench::run_mlp_bench(options.mlp)));
    return 0;
  }
  if (bench.get_subcommand("collectives")->parsed()) {
    const auto tables = bench::run_collectives_bench(options.collectives, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    int64_t wrong = 0;
    for (const auto& t : tables) {
      for (const auto& row : t.rows) wrong += std::max<int64_t>(row.wrong, 0);
    }
    if (wrong > 0) {  // rank 0 sums every rank's count, the others their own; mpirun then fails the job
      fmt::print(stderr, "braid: bench collectives: {} wrong elements\n", wrong);
      return 1;
    }
    return 0;
  }
  if (bench.get_subcommand("rpc")->parsed()) {
    bench::run_rpc_bench(options.rpc, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    return 0;
  }
  if (bench.get_subcommand("dist-autograd")->parsed()) {
    bench::run_dist_autograd_bench(options.dist_autograd, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    return 0;
  }
  if (bench.get_subcommand("ddp")->parsed()) {
    bench::run_ddp_bench(options.ddp, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    return 0;
  }
  if (bench.get_subcommand("fsdp")->parsed()) {
    bench::run_fsdp_bench(options.fsdp, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    return 0;
  }
  if (bench.get_subcommand("checkpoint")->parsed()) {
    fmt::print("{}", bench::format_checkpoint_bench(options.checkpoint, bench::run_checkpoint_bench(options.checkpoint)));
    return 0;
  }
  if (bench.get_subcommand("trace")->parsed()) {
    bench::run_trace_bench(options.trace, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    return 0;
  }
  return 2;
}

}  // namespace braid::cli
