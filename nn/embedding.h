// Lookup tables: nn::Embedding (rows at indices) and nn::EmbeddingBag (sums, means or maxes of bags of
// rows without materialising the rows), as torch.nn.Embedding / EmbeddingBag.
#pragma once

#include <cstdint>

#include "autograd/ops/nn_ops.h"
#include "nn/module.h"
#include "tensor/random.h"

namespace braid::nn {

using EmbeddingBagMode = autograd::EmbeddingBagMode;

class Embedding : public Module {
 public:
  // weight [num_embeddings, embedding_dim] ~ N(0, 1) from `gen` (or the default generator).
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator* gen = nullptr);

  // Integer indices of any shape -> [*indices.shape, embedding_dim].
  Tensor forward(const Tensor& indices) override;
  void reset_parameters(Generator* gen = nullptr);

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  const Tensor& weight() const { return weight_; }

 protected:
  std::string extra_repr() const override;

 private:
  int64_t num_embeddings_;
  int64_t embedding_dim_;
  Tensor weight_;
};

class EmbeddingBag : public Module {
 public:
  // Mode Mean by default, as PyTorch. With `sparse`, the weight's gradient is a sparse COO tensor (not
  // with mode Max). weight ~ N(0, 1).
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, EmbeddingBagMode mode = EmbeddingBagMode::Mean,
               bool sparse = false, Generator* gen = nullptr);

  // A 2-D input [B, L]: B bags of L indices each -> [B, embedding_dim].
  Tensor forward(const Tensor& input) override;
  // {input, offsets[, per_sample_weights]}: a 1-D input with offsets [B] (the start of each bag; a bag
  // may be empty and gives zeros), or a 2-D input with an undefined offsets tensor. per_sample_weights
  // has input's shape and needs mode Sum. Returns {[B, embedding_dim]}.
  TensorList forward_many(const TensorList& inputs) override;
  void reset_parameters(Generator* gen = nullptr);

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  EmbeddingBagMode mode() const { return mode_; }
  bool sparse() const { return sparse_; }
  const Tensor& weight() const { return weight_; }

 protected:
  std::string extra_repr() const override;

 private:
  Tensor bag(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights);

  int64_t num_embeddings_;
  int64_t embedding_dim_;
  EmbeddingBagMode mode_;
  bool sparse_;
  Tensor weight_;
};

// "sum", "mean", "max".
const char* mode_name(EmbeddingBagMode mode);

}  // namespace braid::nn
