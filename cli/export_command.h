// `braid export CHECKPOINT_DIR --format safetensors -o model.safetensors`: a job's trained model as one
// file (runtime/run/export_checkpoint.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace braid::cli {

struct ExportOptions {
  std::string checkpoint;
  std::string format = "safetensors";
  std::string output = "model.safetensors";
};

CLI::App* add_export_command(CLI::App& app, ExportOptions& options);
int run_export_command(const ExportOptions& options);

}  // namespace braid::cli
