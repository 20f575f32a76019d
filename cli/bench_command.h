// `braid bench <what>`: built-in benchmarks. `braid bench mlp` times one training step (forward, backward,
// SGD) of an MLP; bench/run_mlp_bench.sh puts it next to the same step in PyTorch.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/mlp_bench.h"

namespace braid::cli {

struct BenchOptions {
  runtime::MlpBenchOptions mlp;
};

// Registers `bench` with its `mlp` subcommand on `app`.
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);
// Runs the parsed benchmark and prints its table; returns the exit code.
int run_bench_command(CLI::App& bench, const BenchOptions& options);

}  // namespace braid::cli
