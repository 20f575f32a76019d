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
// run, which `braid run --resume` relies on.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/job/job_spec.h"
#include "tensor/tensor.h"

namespace braid::runtime {

// One batch: the model's inputs (forward_many's arguments) and the loss's target.
//   synthetic/csv/binary: inputs {features (B, F) float32}; target (B,) int64 class labels, or (B, 1)
//                         float32 for regression (num_classes 0).
//   seed000:              inputs {dense (B, 2) float32, sparse (B,) int64}; target (B,) float32 values.
struct Batch {
  std::vector<Tensor> inputs;
  Tensor target;
  int64_t size() const;  // rows
  // Rows [begin, end) of every tensor (views): the micro-batches of seed 000's uneven mode.
  Batch slice(int64_t begin, int64_t end) const;
};

enum class Split { Train, Test };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The rows at `indices` (any order, repeats allowed) as one batch. InvalidArgument for an index out of
  // range, naming it and the size.
  virtual Batch gather(const std::vector<int64_t>& indices) const = 0;
  // The number of classes (0 for regression and for seed000), and features per sample (0 for seed000).
  virtual int num_classes() const = 0;
  virtual int num_features() const = 0;
};

// The dataset a spec describes. Split::Test of a file-backed spec reads test_path (nullptr when it is
// empty); synthetic data draws a disjoint test set of num_samples/4 from the same teacher; seed000 has no
// test split (nullptr). Throws InvalidArgument naming the file, line and column for malformed data.
std::unique_ptr<Dataset> make_dataset(const DataSpec& spec, Split split);

// PyTorch's DistributedSampler semantics over `size` samples for `num_replicas` trainers:
//   - shuffle: a permutation drawn from (seed, epoch), the same on every trainer; else 0..size-1;
//   - drop_last: the tail that does not divide evenly is dropped; else the permutation is padded with its
//     own first elements to a multiple of num_replicas;
//   - the share of trainer `rank` is every num_replicas-th index from `rank` (Partition::Interleaved) or
//     the rank-th contiguous block (Partition::Contiguous). Shares are disjoint (apart from padding) and
//     of equal length num_samples().
class DistributedSampler {
 public:
  DistributedSampler(int64_t size, int num_replicas, int rank, const DataSpec& spec, uint64_t seed);

  void set_epoch(int64_t epoch);
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
  std::vector<int64_t> indices_;
};

}  // namespace braid::runtime
