// PowerSGD gradient compression (Vogels et al., 2019), PyTorch 1.13's
// torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook: PowerSGDState and powerSGD_hook.
//
// For the first `start_powersgd_iter` iterations the hook is a plain average allreduce (allreduce_hook);
// an iteration is counted when the bucket with is_last() is processed. After that, per bucket:
//   1. error feedback: the error memorised for this bucket index last time is added to the buffer;
//   2. each gradient is viewed as a matrix M [shape[0], numel / shape[0]]; with r = min(rows, cols,
//      matrix_approximation_rank), the ones where (rows + cols) * r * min_compression_rate < rows * cols
//      are compressed, the others (1-D and 0-dim gradients among them) are averaged uncompressed;
//   3. Q [cols, r] is warm-started: the previous iteration's Q, orthogonalized again; at the first
//      compressed iteration of a bucket (every iteration without warm_start) it is drawn from N(0, 1) with
//      a generator whose seed comes from a sequence started at random_seed (equal on every rank), then
//      orthogonalized;
//   4. P = M Q, allreduced (one allreduce together with the uncompressed gradients), orthogonalized by
//      Gram-Schmidt; Q = M^T P, allreduced; M <- P Q^T / ws;
//   5. with error feedback, error = (input after step 1) - (result), over the whole buffer.
// The future holds the buffer with the result.
//
// Differences from PyTorch, all deliberate:
//   * Orthogonalization is Gram-Schmidt at every rank, twice above rank 2 (PyTorch uses QR there: the same
//     column space, columns possibly of opposite sign, which P Q^T does not see).
//   * A column whose norm is 0 (with orthogonalization_epsilon 0) becomes zeros. PyTorch means to do this
//     (its ZeroDivisionError branch) but tensor division never raises, so it produces NaNs.
//   * The uncompressed gradients and P share one allreduce (PyTorch issues two; the values are the same).
//   * A sparse bucket is reduced uncompressed (allreduce_hook), whatever the iteration.
//   * A bucket index whose layout changed since its memory was made gets fresh memory (with a warning)
//     instead of failing on a size mismatch.
//   * The random Q is drawn with braid's generator, so its values differ from PyTorch's for the same seed.
//
// Threading and ordering: the hook issues both of a bucket's allreduces from the calling thread, so every
// rank issues the group's ops in the same order. The Q allreduce needs the P allreduce's result, so the
// hook waits for that one before returning (blocking the backward thread for one allreduce per bucket);
// the Q allreduce and the decompression run asynchronously and complete the future. Waiting in a
// completion callback instead could deadlock (callbacks run on the group's worker thread) or reorder ops
// between ranks. A state serves one DDP model; its hook must not be called for a bucket index whose
// previous future has not completed (the Reducer waits for every future at the end of backward).
//
// Error feedback is PyTorch's, including a property worth knowing: a rank's error is its input minus the
// *common* result, so besides the compression residual it holds the rank's deviation from the average,
// and it keeps adding that deviation up (input_t = M_t + error_{t-1}). Averaged over the ranks the
// deviations cancel, so the results are unaffected in exact arithmetic, but with gradients that differ
// between ranks in a persistent way the per-rank error grows linearly with the iterations (by
// |M_r - avg M| per iteration where the approximation is exact, e.g. the uncompressed gradients), and
// so does the rounding error of the sums it goes into.
//
// Everything runs on the buffer's device (matrix products through cuBLAS for a CUDA bucket), P and Q
// included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/process_group.h"
#include "parallel/ddp/comm_hook.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace braid::parallel {

// PyTorch's PowerSGDState arguments, with its defaults (names in snake_case: start_powersgd_iter is
// start_powerSGD_iter).
struct PowerSGDOptions {
  int64_t matrix_approximation_rank = 1;
  // > 1 when use_error_feedback or warm_start: DDP rebuilds its buckets after the first iteration, and the
  // per-bucket memory must see the final layout.
  int64_t start_powersgd_iter = 1000;
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  // Added to each column's norm before normalizing; 0 keeps PyTorch's default.
  double orthogonalization_epsilon = 0;
  uint64_t random_seed = 0;
  // Compression statistics are logged (info, "braid.ddp") every this many iterations.
  int64_t compression_stats_logging_frequency = 10'000;
};

struct PowerSGDCompressionStats {
  double compress_rate = 0;  // before / after; 0 before anything was compressed
  int64_t numel_before_compression = 0;
  int64_t numel_after_compression = 0;
};

class PowerSGDState {
 public:
  // Throws InvalidArgument for a null group, matrix_approximation_rank < 1, or start_powersgd_iter <= 1
  // with error feedback or warm start ("Expect `start_powerSGD_iter` > 1 ...", PyTorch's message).
  PowerSGDState(std::shared_ptr<collectives::ProcessGroup> group, PowerSGDOptions options = {});

  const std::shared_ptr<collectives::ProcessGroup>& process_group() const { return group_; }
  const PowerSGDOptions& options() const { return options_; }
  // Iterations counted so far (PyTorch's state.iter).
  int64_t iteration() const;
  PowerSGDCompressionStats compression_stats() const;
  // The local error memorised for a bucket index after its last compressed reduction (a copy; undefined
  // before the first one or without error feedback).
  Tensor error(size_t bucket_index) const;

  // What a checkpoint must carry for a resumed job to compute what an uninterrupted one would: the
  // iteration count and statistics ("iter", "stats"), the generator of the random Qs' seeds ("rng"), and
  // each bucket's error memory and warm-start Q ("bucket.<i>.error", "bucket.<i>.q"), copied to the CPU.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Restores it, between iterations. InvalidArgument naming the key for an entry it does not know or of
  // the wrong kind; the state is then unchanged. Tensors move to the buckets' device at their next use.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  friend class PowerSGDRunner;
  friend class BatchedPowerSGDRunner;

  // Memory of one bucket index, kept across iterations; on the CPU (see the file comment).
  struct BucketMemory {
    Tensor error;  // [buffer numel]
    Tensor pu;     // [uncompressed numel + total P numel]: the first allreduce's buffer; P lives in it
    Tensor q;      // [total Q numel]
  };
  // What the hook's completion callbacks update, apart from the state so that a callback never owns the
  // process group: one that dropped the group's last reference would destroy the group on the group's
  // own worker thread.
  struct Memory {
    mutable std::mutex mu;
    std::map<size_t, std::shared_ptr<BucketMemory>> buckets;  // GUARDED_BY(mu)
    int64_t iter = 0;                                          // GUARDED_BY(mu)
    PowerSGDCompressionStats stats;                            // GUARDED_BY(mu)
    int64_t next_stats_report = 0;                             // GUARDED_BY(mu)
  };

  std::shared_ptr<collectives::ProcessGroup> group_;
  PowerSGDOptions options_;
  Generator rng_;  // draws the per-step seeds of random Qs (locks itself)
  std::shared_ptr<Memory> memory_;
};

NamedCommHook powersgd_hook(std::shared_ptr<PowerSGDState> state);

// PyTorch's batched_powerSGD_hook: the whole bucket, zero-padded to the next square (side = ceil(sqrt(n))),
// is one [side, side] matrix compressed to rank matrix_approximation_rank, whatever the compression rate
// (min_compression_rate is not consulted); error feedback and warm start as above, over the padded bucket.
// Fewer, larger matrix products than powersgd_hook at a usually worse approximation. A state serves one
// of the two hooks, not both.
NamedCommHook batched_powersgd_hook(std::shared_ptr<PowerSGDState> state);

}  // namespace braid::parallel
