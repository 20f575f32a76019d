// What a trainer's checkpoint holds beside the model and the optimizer, so that a job resumed from it
// computes, bit for bit, what an uninterrupted job would have:
//
//   rng.default           the process's default generator (dropout masks), Generator::save_state's bytes
//   ddp.<k>.buckets       the k-th DDP's rebuilt buckets (int64: count, sizes, parameter indices), so that
//                         the resumed job reduces in the same buckets instead of rebuilding them
//   comm_hook.<k>.<key>   the k-th comm hook's state (PowerSGD's error feedback and warm-start Qs)
//
// DDPs and hooks are numbered in the order the trainer made them (the same in every run of one job).
// The data order needs nothing: the sampler is a function of (train.seed, epoch, batch).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/serialize.h"
#include "parallel/ddp/comm_hook.h"
#include "parallel/ddp/ddp.h"

namespace braid::runtime {

struct ResumeParts {
  std::vector<std::shared_ptr<parallel::DistributedDataParallel>> ddps;
  std::vector<parallel::NamedCommHook> hooks;
};

// Appends the entries above to `out`.
void append_resume_state(const ResumeParts& parts, nn::StateDict& out);

// Whether `key` is one of the entries above (the rest of a trainer checkpoint is model and optimizer).
bool is_resume_state_key(const std::string& key);

// Restores the entries of `state` that is_resume_state_key() accepts. The entries are all decoded and
// checked against this job before the first is applied: InvalidArgument naming `path` and the entry for
// one that does not fit (a DDP or hook the job does not have, buckets of another model). A checkpoint
// without them (written before they existed) restores nothing and warns that dropout will differ.
// A resume on another number of trainers restores less (`scope`): a trainer without a saved trainer of its
// index keeps the generator braid run seeded from (train.seed, rank), and comm hooks start afresh (their
// memory is per trainer: PowerSGD's error feedback is this trainer's deviation from the average).
struct ResumeScope {
  bool generator = true;
  bool hooks = true;
};
void restore_resume_state(const ResumeParts& parts, const nn::StateDict& state, const std::string& path,
                          ResumeScope scope = {});

// The process's default generator alone, for a worker's checkpoint of its remote parts ("@generator").
inline constexpr const char* kWorkerGeneratorKey = "@generator";

}  // namespace braid::runtime
