// The hybrid parameter-server job's training examples (data kind "hybrid_examples"): the sixteen samples of
// get_training_examples() in torch's ddp_under_dist_autograd_test.py.
//
// Sixteen samples, built by nested loops in this order: value in (-1, 1), x in (-value, value),
// y in (value, -value), z in (0, 1); sample = dense (x, y), sparse index z, target value. Every sample has
// a twin with the opposite value, so that their gradients cancel in the trainers' all-reduce. The torch test
// hands trainer t the t-th block of four; DistributedSampler with partition contiguous, no shuffle, four
// trainers and batch size 4 gives exactly that.
#include "runtime/data/tabular_dataset.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"

namespace braid::runtime::data {

namespace {

class HybridExamplesDataset final : public Dataset {
 public:
  HybridExamplesDataset() {
    std::vector<float> dense;
    std::vector<int64_t> sparse;
    std::vector<float> values;
    for (const float value : {-1.0f, 1.0f}) {
      for (const float x : {-value, value}) {
        for (const float y : {value, -value}) {
          for (const int64_t z : {0, 1}) {
            dense.insert(dense.end(), {x, y});
            sparse.push_back(z);
            values.push_back(value);
          }
        }
      }
    }
    const auto n = static_cast<int64_t>(values.size());
    dense_ = from_vector(dense, {n, 2});
    sparse_ = from_vector(sparse, {n});
    values_ = from_vector(values, {n});
  }

  int64_t size() const override { return values_.size(0); }

  Batch gather(const std::vector<int64_t>& indices) const override {
    const Tensor index = checked_index_tensor(indices, size(), "hybrid_examples data");
    Batch batch;
    batch.inputs = {index_select(dense_, 0, index), index_select(sparse_, 0, index)};
    batch.target = index_select(values_, 0, index);
    return batch;
  }

  int num_classes() const override { return 0; }
  int num_features() const override { return 0; }

 private:
  Tensor dense_;   // (16, 2) float32
  Tensor sparse_;  // (16,) int64: the embedding row of each sample
  Tensor values_;  // (16,) float32: the target, multiplied into the output by the weighted_sum loss
};

}  // namespace

std::unique_ptr<Dataset> make_hybrid_examples_dataset() { return std::make_unique<HybridExamplesDataset>(); }

}  // namespace braid::runtime::data
