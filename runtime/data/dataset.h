// Training data for a job: a Dataset of samples, a DistributedSampler that gives each trainer its share of
// every epoch, and the batches a trainer feeds its model.
//
//   auto train = make_dataset(job.data, Split::Train);
//   DistributedSampler sampler(train->size(), num_trainers, trainer_index, job.data, job.train.seed);
//   sampler.set_epoch(epoch);
//   Batch b = train->gather(sampler.batch_indices(step_in_epoch, job.train.batch_size));
//   model.forward_many(b.inputs) ... loss(output, b.target)
//
// Everything here is deterministic: the same spec, seed, epoch and trainer give the same batches in every
// run, which `braid run --resume` relies on. Shuffles and synthetic data come from a generator written
// out in runtime/data/split_mix.h (SplitMix64), never from std:: distributions, so they are bit-identical
// across processes, compilers and platforms; data_sampler_test.cc pins permutations to keep them so.
//
// The kinds of data (data.kind), all but npy held in memory once loaded:
//   synthetic  a fixed random teacher drawn from data.seed labels samples x ~ U(-1, 1)^num_features:
//              class = argmax(W x + b + noise) with num_classes >= 2, or the regression target W x + b +
//              noise with num_classes 0. The test split is max(1, num_samples / 4) further samples from
//              another stream of the same teacher, none equal to a training sample.
//   csv        one sample per line of comma-separated numbers; data.header skips a first line (which must
//              have as many fields); blank lines are skipped; "\r\n" is accepted; fields may be padded
//              with spaces, never quoted. data.label_column (negative counts from the end) holds integer
//              class ids 0..C-1, and num_classes() is the file's largest id plus one (so a test file that
//              lacks the top class reports fewer; trainers should size models from the training split).
//              data.feature_columns (negative from the end; empty: every column but the label) are the
//              features, in that order. Errors name the file, the line (from 1) and the column (from 0,
//              the way data.label_column counts): "x.csv:17: column 3: 'abc' is not a number".
//   binary     a state-dict file (nn/serialize.h) with tensors "features" (N, F) and "labels" (N,):
//              integer labels are class ids, floating ones regression targets. See
//              runtime/data/binary_dataset.h for the format and save_binary_dataset(), its writer.
//   npy        NumPy .npy files: data.inputs (N, F, ...), each row flattened to F features, and
//              data.targets (N,): integer class ids (num_classes() the largest plus one), or floating
//              regression targets, (N,) or (N, 1). dtypes <f4 <f8 <i4 <i8 |u1, format versions 1.0 to 3.0;
//              big-endian, bool and Fortran-ordered (N, F) arrays are refused with how to re-save them.
//              The inputs are memory-mapped and never read whole: a gather copies its rows out (as
//              float32), and after every 64 MiB of rows touched the mapping's pages are dropped with
//              madvise(MADV_DONTNEED), so a pass over a file larger than memory keeps the resident set
//              near 64 MiB (the pages stay in the page cache). The targets are read whole. See
//              runtime/data/npy_file.h and npy_dataset.h; data.feature_columns does not apply.
//   hybrid_examples
//              the sixteen examples of the hybrid job (examples/hybrid): get_training_examples() of torch's
//              ddp_under_dist_autograd_test.py; no test split.
// data.feature_scale multiplies every feature (synthetic, csv, binary, npy), after the labels are made.
//
// Test splits: a file-backed kind reads data.test_path, npy data.test_inputs and data.test_targets
// (make_dataset returns nullptr when they are empty), synthetic draws one, hybrid_examples has none.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/job/job_spec.h"
#include "tensor/tensor.h"

namespace braid::runtime {

// One batch: the model's inputs (forward_many's arguments) and the loss's target.
//   synthetic/csv/binary/npy: inputs {features (B, F) float32}; target (B,) int64 class labels, or (B, 1)
//                             float32 for regression (num_classes 0).
//   hybrid_examples:          inputs {dense (B, 2) float32, sparse (B,) int64}; target (B,) float32 values.
struct Batch {
  std::vector<Tensor> inputs;
  Tensor target;
  int64_t size() const;  // rows
  // Rows [begin, end) of every tensor (views): the micro-batches of the hybrid job's uneven mode
  // (data.uneven).
  Batch slice(int64_t begin, int64_t end) const;
  // Every tensor copied to `device` (this batch itself when it is already there): a CUDA trainer's input.
  Batch to(Device device) const;
};

enum class Split { Train, Test };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The rows at `indices` (any order, repeats allowed) as one batch. InvalidArgument for an index out of
  // range, naming it and the size.
  virtual Batch gather(const std::vector<int64_t>& indices) const = 0;
  // The number of classes (0 for regression and for hybrid_examples), and features per sample
  // (0 for hybrid_examples).
  virtual int num_classes() const = 0;
  virtual int num_features() const = 0;
};

// The dataset a spec describes. Split::Test of a file-backed spec reads test_path, or test_inputs and
// test_targets for npy (nullptr when empty); synthetic data draws a disjoint test set of num_samples/4 from
// the same teacher; hybrid_examples has no test split (nullptr). Throws InvalidArgument naming the file,
// line and column for malformed data.
std::unique_ptr<Dataset> make_dataset(const DataSpec& spec, Split split);

// PyTorch's DistributedSampler semantics over `size` samples for `num_replicas` trainers:
//   - shuffle: a permutation drawn from (seed, epoch), the same on every trainer; else 0..size-1;
//   - drop_last: the tail that does not divide evenly is dropped; else the permutation is padded with its
//     own first elements to a multiple of num_replicas;
//   - the share of trainer `rank` is every num_replicas-th index from `rank` (Partition::Interleaved) or
//     the rank-th contiguous block (Partition::Contiguous). Shares are disjoint (apart from padding) and
//     of equal length num_samples().
// A part of an epoch that ran on another number of trainers, before a resume on this one (the
// checkpoint's data cursor): `trainers` trainers took their first `batches` batches.
struct EpochSegment {
  int trainers = 1;
  int64_t batches = 0;
  bool operator==(const EpochSegment&) const = default;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t size, int num_replicas, int rank, const DataSpec& spec, uint64_t seed);

  void set_epoch(int64_t epoch);
  // The rest of an epoch after `before` (earlier segments, in order) consumed its start: the epoch's list
  // is dealt as for before[0].trainers trainers (padding, drop_last and partition as always), each
  // trainer's first batches * batch_size samples are taken away, the rest of every trainer's share is
  // joined in trainer order; the same for each further segment; what is left is dealt to this sampler's
  // trainers. No segment: the whole epoch, as set_epoch(epoch). So a job resumed on another number of
  // trainers sees each sample of the epoch once more at most (padding apart), none twice.
  void set_epoch(int64_t epoch, const std::vector<EpochSegment>& before, int batch_size);
  int64_t epoch() const { return epoch_; }
  // This trainer's indices for the current epoch, in order.
  const std::vector<int64_t>& indices() const { return indices_; }
  int64_t num_samples() const;
  // Batches per epoch of `batch_size` rows: a short last batch is kept unless drop_last.
  int64_t num_batches(int batch_size) const;
  // The indices of batch `b` of the current epoch.
  std::vector<int64_t> batch_indices(int64_t b, int batch_size) const;

 private:
  void build();
  int64_t size_;
  int num_replicas_;
  int rank_;
  Partition partition_;
  bool shuffle_;
  bool drop_last_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  std::vector<EpochSegment> before_;
  int before_batch_size_ = 1;
  int64_t list_size_ = 0;  // the samples left to deal this epoch (size_ without earlier segments)
  std::vector<int64_t> indices_;
};

}  // namespace braid::runtime
