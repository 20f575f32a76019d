// `braid export`: a job's checkpoint as one file of the trained model's weights, for PyTorch, Hugging Face
// tools or another braid job's model.init_from.
//
// The checkpoint is read without running the job: its meta.json (checkpoint_dir.h) holds the job, whose
// model is built here on one process (loading the job's plugins when its model comes from one). DDP
// checkpoints hold the whole model on every trainer: the first trainer's is used. FSDP checkpoints hold
// each trainer's rows of every sharded parameter: they are put back together in rank order
// (parallel/fsdp/sharded_state_dict.h), so the file holds full tensors whatever the trainer count was.
// Models with parts on workers (hybrid) are refused: only a trainer's own module is exported.
#pragma once

#include <cstdint>
#include <string>

namespace braid::runtime {

struct ExportResult {
  std::string step_dir;  // the checkpoint that was read
  int64_t step = 0;
  std::string model_kind;
  size_t tensors = 0;
  size_t bytes = 0;  // of tensor data
};

// `checkpoint`: a checkpoint.dir (its `latest` is used) or one step directory. Writes `output` atomically
// in safetensors format (nn/safetensors.h), with __metadata__ {"format": "pt", "braid.job", "braid.step",
// "braid.model"}. InvalidArgument naming the directory or file for anything missing or inconsistent.
ExportResult export_checkpoint(const std::string& checkpoint, const std::string& output);

}  // namespace braid::runtime
