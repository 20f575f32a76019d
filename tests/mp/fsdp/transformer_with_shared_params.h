// The seed's TransformerWithSharedParams (common_fsdp.py) in braid: token embeddings (vocab 23, d_model 16)
// into nn::Transformer (nhead 8, 2 encoder and 2 decoder layers, dim_feedforward 8), then an output
// projection whose weight IS the embedding table (tied, as the seed's `output_proj.weight =
// embed_tokens.weight`), plus the seed's two buffers. add_bn is false (BatchNorm is not in braid), so
// the seed's bn is the identity and is left out. Dropout is 0 so that runs are deterministic.
#pragma once

#include <cmath>
#include <memory>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/shape.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/module.h"
#include "nn/transformer.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::mp {

// The output projection of TransformerWithSharedParams: y = x E^T + b with E the embedding table it is
// given. It registers only its bias, so the tied table is one parameter (named embed_tokens.weight, as
// PyTorch's named_parameters() names it after removing the duplicate) and FSDP shards it once.
class TiedOutputProjection : public nn::Module {
 public:
  TiedOutputProjection(std::shared_ptr<nn::Embedding> embedding, Generator* gen)
      : nn::Module("TiedOutputProjection"), embedding_(std::move(embedding)) {
    const int64_t vocab = embedding_->num_embeddings();
    const double bound = 1.0 / std::sqrt(static_cast<double>(embedding_->embedding_dim()));
    bias_ = register_parameter("bias", empty({vocab}));
    nn::init::uniform_(bias_, -bound, bound, gen);
  }
  // The table is read through the embedding's handle on every call: under FSDP that handle holds the
  // gathered full table while the root unit is unsharded.
  Tensor forward(const Tensor& x) override { return autograd::linear(x, embedding_->weight(), bias_); }

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  Tensor bias_;
};

class TransformerWithSharedParams : public nn::Module {
 public:
  static constexpr int64_t kVocab = 23;
  static constexpr int64_t kModel = 16;

  explicit TransformerWithSharedParams(uint64_t seed) : nn::Module("TransformerWithSharedParams") {
    Generator gen(seed);
    embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(kVocab, kModel, &gen));
    nn::TransformerOptions o;
    o.d_model = kModel;
    o.nhead = 8;
    o.num_encoder_layers = 2;
    o.num_decoder_layers = 2;
    o.dim_feedforward = 8;
    o.dropout = 0.0;
    transformer = register_module("transformer", std::make_shared<nn::Transformer>(o, &gen));
    output_proj = register_module("output_proj", std::make_shared<TiedOutputProjection>(embed_tokens, &gen));
    vocab_bias_ = register_buffer("vocab_bias", ones({kModel}));
    long_buffer_ = register_buffer("long_buffer", zeros({kModel}, DType::Int64));
  }

  // {src_ids [S, N], tgt_ids [T, N]} (int64, sequence first) -> {logits [T, N, vocab]}.
  nn::TensorList forward_many(const nn::TensorList& inputs) override {
    Tensor src = (*embed_tokens)(inputs[0]);
    src = autograd::add(autograd::add(src, vocab_bias_), long_buffer_.to(src.dtype()));
    const Tensor tgt = (*embed_tokens)(inputs[1]);
    const Tensor x = (*transformer)(nn::TensorList{src, tgt})[0];
    return {(*output_proj)(x)};
  }

  // The seed's get_loss: cross entropy of every target token, summed.
  static Tensor loss(const Tensor& logits, const Tensor& tgt_ids) {
    return autograd::cross_entropy(autograd::reshape(logits, {-1, kVocab}), tgt_ids.reshape({-1}),
                                   autograd::Reduction::Sum);
  }

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::Transformer> transformer;
  std::shared_ptr<TiedOutputProjection> output_proj;

 private:
  Tensor vocab_bias_;
  Tensor long_buffer_;
};

}  // namespace braid::mp
