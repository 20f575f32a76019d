#include "cli/export_command.h"

#include <fmt/format.h>

#include "runtime/run/export_checkpoint.h"

namespace braid::cli {

CLI::App* add_export_command(CLI::App& app, ExportOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a checkpoint's trained model as one safetensors file (for PyTorch, Hugging Face tools, or "
                "model.init_from)");
  cmd->add_option("checkpoint", options.checkpoint,
                  "A job's checkpoint.dir (its latest checkpoint is used) or one step-NNNNNNNN directory")
      ->required();
  cmd->add_option("--format", options.format, "The file format")
      ->check(CLI::IsMember({"safetensors"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", options.output, "The file to write (atomically)")->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  braid export ckpt --format safetensors -o model.safetensors\n"
      "      the latest checkpoint of a job with checkpoint: {dir: ckpt}; FSDP's shards are put back together\n"
      "  braid export ckpt/step-00000460 -o step460.safetensors      one particular checkpoint\n"
      "\n"
      "The names are the model's state-dict keys (\"0.weight\", ...), as PyTorch's module.state_dict() would\n"
      "name them for the same architecture. In Python: safetensors.torch.load_file('model.safetensors').\n"
      "A model from a plugin is built with the plugin the job named. Exit codes: 0 written, 2 bad input.");
  return cmd;
}

int run_export_command(const ExportOptions& options) {
  const runtime::ExportResult r = runtime::export_checkpoint(options.checkpoint, options.output);
  fmt::print("{}: model {} at step {}: {} tensors, {} bytes -> {}\n", r.step_dir, r.model_kind, r.step, r.tensors,
             r.bytes, options.output);
  return 0;
}

}  // namespace braid::cli
