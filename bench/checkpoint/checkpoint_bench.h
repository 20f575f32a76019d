// `braid bench checkpoint`: how long a checkpoint stalls training, written synchronously
// (nn::save_state_dict in the training thread) and asynchronously (runtime::CheckpointWriter: copy to
// memory, write in the background), in one run.
//
// The state is `size_mb` of float32 in `tensors` tensors. "Training" is a loop of steps: fixed matrix
// products on the calling thread and `threads` OpenBLAS threads (the forward and backward, ~ step_ms),
// then the optimizer step's wait for a deferred copy. Each round checkpoints once per variant, the
// variants alternating, each into a fresh file under `dir`:
//   sync        stall = the time save_state_dict blocks the loop (CRC-32, write, fsync, rename);
//   copy first  stall = the time submit() blocks (it copies everything) + the time the steps run slower
//               than the baseline while the writer thread writes (cores and memory bandwidth are shared);
//   overlapped  submit() defers every entry (as a trainer defers its parameters and optimizer state):
//               stall = submit() + the steps' extra time, which now holds the optimizer step's wait for
//               the writer thread's copy. What braid run's trainers do.
// The first round also allocates and first-touches the writer's buffers; the table shows it apart and
// takes the verdict from the rounds after it (the steady state of a long job). Verdict: the overlapped
// stall <= 10% of the sync write.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace braid::bench {

struct CheckpointBenchOptions {
  int64_t size_mb = 1024;
  int tensors = 16;
  int rounds = 3;
  double step_ms = 20;
  // OpenBLAS threads of the loop: 1 leaves this 2-core machine's other core to the writer (a rank whose
  // training is one thread, or a GPU job); 2 makes the writer take its CPU from the training.
  int threads = 1;
  std::string dir;  // empty: a temporary directory under TMPDIR (removed at the end)
};

struct CheckpointBenchResult {
  double step_ms = 0;                 // the baseline step
  std::vector<double> sync_s;         // per round
  std::vector<double> async_block_s;  // per round, copy first: submit()
  std::vector<double> async_slow_s;   // per round, copy first: extra step time while writing
  std::vector<double> async_write_s;  // per round, copy first: submit to written
  std::vector<double> overlap_block_s;  // per round, overlapped: submit()
  std::vector<double> overlap_slow_s;   // per round, overlapped: extra step time (the copy's wait included)
};

CheckpointBenchResult run_checkpoint_bench(const CheckpointBenchOptions& options);
std::string format_checkpoint_bench(const CheckpointBenchOptions& options, const CheckpointBenchResult& result);

}  // namespace braid::bench
