#include "nn/embedding.h"

#include <fmt/format.h>

#include "base/check.h"
#include "nn/init.h"
#include "tensor/factory.h"

namespace braid::nn {

const char* mode_name(EmbeddingBagMode mode) {
  switch (mode) {
    case EmbeddingBagMode::Sum:
      return "sum";
    case EmbeddingBagMode::Mean:
      return "mean";
    case EmbeddingBagMode::Max:
      return "max";
  }
  return "?";
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator* gen)
    : Module("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  BRAID_CHECK_ARG(num_embeddings >= 0 && embedding_dim >= 0,
                  "Embedding: num_embeddings and embedding_dim must be non-negative, got {} and {}", num_embeddings,
                  embedding_dim);
  weight_ = register_parameter("weight", Tensor::empty({num_embeddings, embedding_dim}));
  reset_parameters(gen);
}

void Embedding::reset_parameters(Generator* gen) { init::normal_(weight_, 0.0, 1.0, gen); }

Tensor Embedding::forward(const Tensor& indices) { return autograd::embedding(weight_, indices); }

std::string Embedding::extra_repr() const { return fmt::format("{}, {}", num_embeddings_, embedding_dim_); }

EmbeddingBag::EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, EmbeddingBagMode mode, bool sparse,
                           Generator* gen)
    : Module("EmbeddingBag"),
      num_embeddings_(num_embeddings),
      embedding_dim_(embedding_dim),
      mode_(mode),
      sparse_(sparse) {
  BRAID_CHECK_ARG(num_embeddings >= 0 && embedding_dim >= 0,
                  "EmbeddingBag: num_embeddings and embedding_dim must be non-negative, got {} and {}",
                  num_embeddings, embedding_dim);
  // Refuse at construction rather than at the first forward: the combination can never work.
  BRAID_CHECK_ARG(!sparse || mode != EmbeddingBagMode::Max,
                  "EmbeddingBag: sparse gradients are not supported with mode max");
  weight_ = register_parameter("weight", Tensor::empty({num_embeddings, embedding_dim}));
  reset_parameters(gen);
}

void EmbeddingBag::reset_parameters(Generator* gen) { init::normal_(weight_, 0.0, 1.0, gen); }

Tensor EmbeddingBag::bag(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  BRAID_CHECK_ARG(input.defined(), "EmbeddingBag: input is undefined");
  if (input.dim() == 2) {
    BRAID_CHECK_ARG(!offsets.defined(), "EmbeddingBag: if input is 2D, then offsets has to be None, as input is "
                    "treated is a mini-batch of fixed length sequences. However, found offsets of type {}",
                    offsets.describe());
    const int64_t batch = input.size(0), length = input.size(1);
    // Bags of `length` indices each; arange cannot take step 0, so empty bags get all-zero offsets.
    const Tensor starts = length > 0 ? arange(0, batch * length, length) : zeros({batch}, DType::Int64);
    Tensor psw = per_sample_weights;
    if (psw.defined()) {
      BRAID_CHECK_ARG(psw.shape() == input.shape(), "EmbeddingBag: per_sample_weights {} must have the shape of "
                      "input {}", shape_str(psw.shape()), shape_str(input.shape()));
      psw = psw.reshape({-1});
    }
    return autograd::embedding_bag(weight_, input.reshape({-1}), starts, mode_, psw, sparse_);
  }
  BRAID_CHECK_ARG(input.dim() == 1, "EmbeddingBag: input has to be 1D or 2D Tensor, but got Tensor of dimension {}",
                  input.dim());
  BRAID_CHECK_ARG(offsets.defined(), "EmbeddingBag: offsets has to be a 1D Tensor but got None");
  BRAID_CHECK_ARG(offsets.dim() == 1, "EmbeddingBag: offsets has to be a 1D Tensor, got {}", offsets.describe());
  BRAID_CHECK_ARG(!per_sample_weights.defined() || per_sample_weights.shape() == input.shape(),
                  "EmbeddingBag: per_sample_weights {} must have the shape of input {}",
                  shape_str(per_sample_weights.defined() ? per_sample_weights.shape() : Shape{}),
                  shape_str(input.shape()));
  return autograd::embedding_bag(weight_, input, offsets, mode_, per_sample_weights, sparse_);
}

Tensor EmbeddingBag::forward(const Tensor& input) { return bag(input, Tensor(), Tensor()); }

TensorList EmbeddingBag::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(!inputs.empty() && inputs.size() <= 3,
                  "EmbeddingBag: expects {{input, offsets[, per_sample_weights]}}, got {} tensors", inputs.size());
  const Tensor none;
  return {bag(inputs[0], inputs.size() > 1 ? inputs[1] : none, inputs.size() > 2 ? inputs[2] : none)};
}

std::string EmbeddingBag::extra_repr() const {
  return fmt::format("{}, {}, mode={}", num_embeddings_, embedding_dim_, mode_name(mode_));
}

}  // namespace braid::nn
