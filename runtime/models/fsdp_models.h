// The FSDP test models of torch's torch/testing/_internal/common_fsdp.py, as model kinds "fsdp_nested" and
// "transformer" and for the FSDP tests (tests/mp/fsdp) to use directly.
//
//   NestedWrappedModule          Sequential(Linear(8, 4), Sequential(Linear(4, 16), Linear(16, 16)),
//                                Linear(16, 4), Linear(4, 8)) under the child "module"; no activations, as in
//                                common_fsdp. common_fsdp wraps the inner Sequential, its first Linear and
//                                Linear(16, 4) in FSDP units of their own when asked (wrap_targets()).
//   TransformerWithSharedParams  token embeddings (vocab 23, d_model 16) into nn::Transformer (nhead 8, 2
//                                encoder and 2 decoder layers, dim_feedforward 8, dropout 0), then an output
//                                projection whose weight IS the embedding table (tied), plus common_fsdp's
//                                two buffers. Without common_fsdp's add_bn batch norm (the model kind predates
//                                nn::BatchNorm1d; adding it would change every run of the kind).
//
// Both draw every parameter from a generator seeded with `seed`, so equal seeds give equal modules.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/container.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/transformer.h"
#include "tensor/random.h"

namespace braid::runtime {

class NestedWrappedModule : public nn::Module {
 public:
  explicit NestedWrappedModule(uint64_t seed);
  // [N, 8] -> [N, 8].
  Tensor forward(const Tensor& x) override;
  // common_fsdp's _maybe_wrap targets, innermost first (bottom-up order for fully_shard).
  std::vector<nn::Module*> wrap_targets() { return {inner_first.get(), inner.get(), outer_third.get()}; }

  std::shared_ptr<nn::Sequential> module, inner;
  std::shared_ptr<nn::Linear> inner_first, outer_third;
};

// The output projection of TransformerWithSharedParams: y = x E^T + b with E the embedding table it is
// given. It registers only its bias, so the tied table is one parameter (named embed_tokens.weight, as
// PyTorch's named_parameters() names it after removing the duplicate) and FSDP shards it once.
class TiedOutputProjection : public nn::Module {
 public:
  TiedOutputProjection(std::shared_ptr<nn::Embedding> embedding, Generator* gen);
  // The table is read through the embedding's handle on every call: under FSDP that handle holds the
  // gathered full table while the root unit is unsharded.
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  Tensor bias_;
};

class TransformerWithSharedParams : public nn::Module {
 public:
  static constexpr int64_t kVocab = 23;
  static constexpr int64_t kModel = 16;

  explicit TransformerWithSharedParams(uint64_t seed);

  // {src_ids [S, N], tgt_ids [T, N]} (int64, sequence first) -> {logits [T, N, vocab]}.
  nn::TensorList forward_many(const nn::TensorList& inputs) override;

  // common_fsdp's get_loss: cross entropy of every target token, summed.
  static Tensor loss(const Tensor& logits, const Tensor& tgt_ids);

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::Transformer> transformer;
  std::shared_ptr<TiedOutputProjection> output_proj;

 private:
  Tensor vocab_bias_;
  Tensor long_buffer_;
};

}  // namespace braid::runtime
