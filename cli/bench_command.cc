#include "cli/bench_command.h"

#include <fmt/format.h>

namespace braid::cli {

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
  return bench;
}

int run_bench_command(CLI::App& bench, const BenchOptions& options) {
  if (bench.get_subcommand("mlp")->parsed()) {
    fmt::print("{}", runtime::format_mlp_bench(options.mlp, runtime::run_mlp_bench(options.mlp)));
    return 0;
  }
  return 2;
}

}  // namespace braid::cli
