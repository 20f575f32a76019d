// `braid bench <what>`: built-in benchmarks. `braid bench mlp` times one training step (forward, backward,
// SGD) of an MLP; bench/run_mlp_bench.sh puts it next to the same step in PyTorch. `braid bench
// collectives` times a collective through braid and through the raw engine (MPI, Gloo, NCCL) side by side.
// `braid bench rpc` times RPC calls between two workers (bench/run_rpc_bench.sh adds PyTorch's TensorPipe).
// `braid bench dist-autograd` times a distributed backward pass through a remote Linear next to the local one
// (bench/run_dist_autograd_bench.sh adds PyTorch's torch.distributed.autograd). `braid bench ddp` times a
// training step through DistributedDataParallel next to the plain step (bench/run_ddp_bench.sh adds PyTorch's DDP).
// `braid bench fsdp` times an FSDP training step and the memory forward holds under each sharding strategy.
// `braid bench trace` times what the flight recorder and the desync check add to each collective.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/checkpoint/checkpoint_bench.h"
#include "bench/collectives/collectives_bench.h"
#include "bench/ddp/ddp_bench.h"
#include "bench/dist_autograd/dist_autograd_bench.h"
#include "bench/fsdp/fsdp_bench.h"
#include "bench/mlp/mlp_bench.h"
#include "bench/rpc/rpc_bench.h"
#include "bench/trace/trace_bench.h"

namespace braid::cli {

struct BenchOptions {
  bench::MlpBenchOptions mlp;
  bench::CollectivesBenchOptions collectives;
  bench::RpcBenchOptions rpc;
  bench::DistAutogradBenchOptions dist_autograd;
  bench::DdpBenchOptions ddp;
  bench::FsdpBenchOptions fsdp;
  bench::TraceBenchOptions trace;
  bench::CheckpointBenchOptions checkpoint;
};

// Registers `bench` with its `mlp`, `collectives`, `rpc`, `dist-autograd`, `ddp` and `fsdp` subcommands on `app`.
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);
// Runs the parsed benchmark and prints its table; returns the exit code.
int run_bench_command(CLI::App& bench, const BenchOptions& options);

}  // namespace braid::cli
