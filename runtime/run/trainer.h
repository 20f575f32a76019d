// The Trainer: one per trainer rank, created there by the driver over RPC (class "braid.Trainer" in
// rpc::global_registry()) and driven step by step.
//
// It builds the job's model from the registry (runtime/models/model_registry.h) with the remote parts the
// driver made on the workers, wraps it (ddp.mode outside: DistributedDataParallel of the whole model over
// the trainers' group; inside: the model wraps its own sub-module through ModelBuild::wrap_inside;
// fsdp.enabled: fully_shard of each fsdp.wrap child, then of the root), and reads its shard of the
// training data through a DistributedSampler.
//
// train_step(step, epoch, batch): the batch's micro-batches (data.micro_batch rows each, one when 0; with
// data.uneven the first half of the trainers keep only the first half of them — two halves when
// micro_batch is 0 — under DDP's join()), each in a distributed-autograd context of its own that is
// released when the micro-batch is done: forward, loss, dist_autograd::backward, then the local optimizer
// steps with this context's gradients of the local parameters and a DistributedOptimizer steps the remote
// parts' parameters on their owners, which apply the trainers' steps in trainer order (step_order.h). DDP and FSDP
// reduce inside the backward, so the context's map holds the reduced gradients (as DDP under torch's
// distributed autograd, ddp_under_dist_autograd_test.py, has it).
//
// Constructor arguments over RPC: (trainer index, the job as JSON text, encode_parts() of the remote
// parts). The job text must match this process's own reading of the job file (every process parses the
// same file and --set overrides): a mismatch fails, showing both.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/core/process_group.h"
#include "dist_autograd/dist_optimizer.h"
#include "dist_autograd/remote_module.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "parallel/ddp/ddp.h"
#include "rpc/value.h"
#include "runtime/data/dataset.h"
#include "runtime/job/job_spec.h"
#include "runtime/run/resume_state.h"

namespace braid::runtime {

inline constexpr const char* kTrainerClass = "braid.Trainer";

// What a trainer is told about one remote part.
struct RemotePartHandle {
  std::string name;
  std::string remote_device;  // "worker4/cpu"
  std::string module_class;
  rpc::RRef module_rref;
};

// Where one remote part's parameters sit among a DistributedOptimizer's: the optimizer of owner `owner`
// (its index in owners()), parameters [offset, offset + count) of its list. Checkpoints key the remote
// optimizers' state by part, so that a job resumed with its parts on other workers (and so grouped into
// other owners' optimizers) finds each part's state.
struct RemoteOptimizerSlot {
  std::string part;
  size_t owner = 0;
  size_t offset = 0;
  size_t count = 0;
};
// `params[k]`: part k's parameter RRefs, in the order they went to the DistributedOptimizer.
std::vector<RemoteOptimizerSlot> remote_optimizer_slots(const std::vector<RemotePartHandle>& parts,
                                                        const std::vector<std::vector<rpc::RRef>>& params,
                                                        const std::vector<rpc::WorkerInfo>& owners);

rpc::Value encode_parts(const std::vector<RemotePartHandle>& parts);
std::vector<RemotePartHandle> decode_parts(const rpc::Value& value);

class Trainer {
 public:
  Trainer(const JobSpec& job, int index, std::shared_ptr<collectives::ProcessGroup> trainers,
          const std::vector<RemotePartHandle>& parts);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // {"num_batches", "num_samples", "dataset_size", "has_test"}: the driver plans the epochs from trainer
  // 0's answer.
  rpc::Value info() const;
  // One step; returns {"loss" (rows-weighted mean over its micro-batches), "samples", and with want_grads
  // "microbatches": [{"loss", "grads": {parameter name: gradient}}]}.
  // `before`: the parts of this epoch run on other trainer counts before a resume (DistributedSampler).
  rpc::Value train_step(int64_t step, int64_t epoch, const std::vector<EpochSegment>& before, int64_t batch,
                        bool want_grads);
  // This trainer's shard of the test split: {"loss_sum", "correct", "samples", "classified"} (no-grad, eval
  // mode; "classified": whether the data has classes, so that accuracy means something).
  rpc::Value evaluate();
  // Model and optimizer state, into one file (nn::save_state_dict, atomic) / back. With `async` the
  // state is copied and written in the background (checkpoint_writer.h): save returns after the copy.
  void save(const std::string& path, bool async) const;
  void load(const std::string& path, ResumeScope scope = {});
  // Resumes from a checkpoint of another number of trainers or another sharding (FSDP), either way:
  // `shards` are one saved shard group's files in trainer order (one file when the saved model was not
  // sharded), of which this trainer reads only the entries that hold its rows (parallel/fsdp/reshard.h);
  // `replica` is the file of the saved trainer whose per-trainer state (the remote parts' optimizer
  // state) this one takes: that of its own index, or of its index modulo the saved count, as load() on a
  // resize; its generator too when `generator`. Comm hooks start afresh.
  void load_resharded(const std::vector<std::string>& shards, const std::string& replica, bool generator);
  // The model's parameters by name (as dump-grads names them): {name: tensor}.
  rpc::Value parameters() const;
  // Drops the model, wrappers and optimizers (before the job's groups go away).
  void destroy();

 private:
  nn::Module& front();  // what forward goes through: the DDP or FSDP wrapper, or the model
  void restore_remote_optimizers(const std::map<size_t, rpc::Dict>& by_owner, const std::string& path);
  std::vector<std::pair<std::string, Tensor>> named_params() const;

  const JobSpec job_;
  // Where the model, its batches and its optimizer live (devices.trainers, job_runtime.h process_device):
  // the model is built on the CPU, the same on every trainer, and moved before DDP or FSDP wraps it.
  const Device device_;
  const int index_;
  const int num_trainers_;
  std::shared_ptr<collectives::ProcessGroup> group_;
  std::vector<std::shared_ptr<dist_autograd::RemoteModule>> remote_;
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<parallel::DistributedDataParallel> ddp_;  // ddp.mode outside
  std::unique_ptr<nn::optim::Optimizer> optimizer_;          // null for optimizer.kind none
  std::unique_ptr<dist_autograd::DistributedOptimizer> remote_optimizer_;
  std::vector<RemoteOptimizerSlot> remote_slots_;  // remote_optimizer_'s parameters, by part
  ResumeParts resume_parts_;  // every DDP and comm hook, for the checkpoint (resume_state.h)
  std::unique_ptr<Dataset> train_;
  std::unique_ptr<Dataset> test_;
  std::optional<DistributedSampler> sampler_;
};

// Registers "braid.Trainer" (once per process). The trainers' group comes from `group_source`, called on
// construction (the process's JobRuntime holds it), and the job from `job_source`.
void register_trainer_class(std::function<const JobSpec&()> job_source,
                            std::function<std::shared_ptr<collectives::ProcessGroup>()> group_source);

// Dotted parameter names without the "module." levels DDP wrappers add ("module.fc1.weight" -> "fc1.weight",
// "fc2.module.weight" -> "fc2.weight"), so that names do not depend on ddp.mode.
std::string plain_parameter_name(const std::string& name);

}  // namespace braid::runtime
