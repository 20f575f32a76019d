// The FSDP test models (fsdp_models.h) and their registry definitions. Neither takes arguments: their
// shapes are those of torch's common_fsdp.py.
#include "runtime/models/fsdp_models.h"

#include <cmath>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/shape.h"
#include "base/check.h"
#include "nn/init.h"
#include "runtime/models/builtin_models.h"
#include "tensor/factory.h"

namespace braid::runtime {

NestedWrappedModule::NestedWrappedModule(uint64_t seed) : nn::Module("NestedWrappedModule") {
  Generator gen(seed);
  // Construction order fixes which draws each layer gets; it follows common_fsdp's (inner layers first).
  inner_first = std::make_shared<nn::Linear>(4, 16, true, &gen);
  using Modules = std::initializer_list<std::shared_ptr<nn::Module>>;
  inner = std::make_shared<nn::Sequential>(Modules{inner_first, std::make_shared<nn::Linear>(16, 16, true, &gen)});
  outer_third = std::make_shared<nn::Linear>(16, 4, true, &gen);
  auto first = std::make_shared<nn::Linear>(8, 4, true, &gen);
  auto last = std::make_shared<nn::Linear>(4, 8, true, &gen);
  module = register_module("module", std::make_shared<nn::Sequential>(Modules{first, inner, outer_third, last}));
}

Tensor NestedWrappedModule::forward(const Tensor& x) { return (*module)(x); }

TiedOutputProjection::TiedOutputProjection(std::shared_ptr<nn::Embedding> embedding, Generator* gen)
    : nn::Module("TiedOutputProjection"), embedding_(std::move(embedding)) {
  const int64_t vocab = embedding_->num_embeddings();
  const double bound = 1.0 / std::sqrt(static_cast<double>(embedding_->embedding_dim()));
  bias_ = register_parameter("bias", empty({vocab}));
  nn::init::uniform_(bias_, -bound, bound, gen);
}

Tensor TiedOutputProjection::forward(const Tensor& x) { return autograd::linear(x, embedding_->weight(), bias_); }

TransformerWithSharedParams::TransformerWithSharedParams(uint64_t seed) : nn::Module("TransformerWithSharedParams") {
  Generator gen(seed);
  embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(kVocab, kModel, &gen));
  nn::TransformerOptions o;
  o.d_model = kModel;
  o.nhead = 8;
  o.num_encoder_layers = 2;
  o.num_decoder_layers = 2;
  o.dim_feedforward = 8;
  o.dropout = 0.0;  // deterministic runs
  transformer = register_module("transformer", std::make_shared<nn::Transformer>(o, &gen));
  output_proj = register_module("output_proj", std::make_shared<TiedOutputProjection>(embed_tokens, &gen));
  vocab_bias_ = register_buffer("vocab_bias", ones({kModel}));
  long_buffer_ = register_buffer("long_buffer", zeros({kModel}, DType::Int64));
}

nn::TensorList TransformerWithSharedParams::forward_many(const nn::TensorList& inputs) {
  BRAID_CHECK_ARG(inputs.size() == 2, "TransformerWithSharedParams: expected 2 inputs (src_ids [S, N], tgt_ids "
                  "[T, N]), got {}", inputs.size());
  Tensor src = (*embed_tokens)(inputs[0]);
  src = autograd::add(autograd::add(src, vocab_bias_), long_buffer_.to(src.dtype()));
  const Tensor tgt = (*embed_tokens)(inputs[1]);
  const Tensor x = (*transformer)(nn::TensorList{src, tgt})[0];
  return {(*output_proj)(x)};
}

Tensor TransformerWithSharedParams::loss(const Tensor& logits, const Tensor& tgt_ids) {
  return autograd::cross_entropy(autograd::reshape(logits, {-1, kVocab}), tgt_ids.reshape({-1}),
                                 autograd::Reduction::Sum);
}

namespace detail {

std::vector<BuiltinModel> fsdp_models() {
  ModelDefinition nested;
  nested.name = "fsdp_nested";
  nested.help = "the FSDP tests' NestedWrappedModule: [N, 8] -> [N, 8], four Linear layers, two nested; no args";
  nested.build = [](const ModelBuild& b) -> std::shared_ptr<nn::Module> {
    return std::make_shared<NestedWrappedModule>(b.init_seed);
  };
  ModelDefinition transformer;
  transformer.name = "transformer";
  transformer.help = "the FSDP tests' TransformerWithSharedParams: {src [S, N], tgt [T, N]} int64 token ids "
                     "(vocab 23) -> logits [T, N, 23], tied embeddings; no args";
  transformer.build = [](const ModelBuild& b) -> std::shared_ptr<nn::Module> {
    return std::make_shared<TransformerWithSharedParams>(b.init_seed);
  };
  std::vector<BuiltinModel> out;
  out.push_back({std::move(nested), nullptr});
  out.push_back({std::move(transformer), nullptr});
  return out;
}

}  // namespace detail

}  // namespace braid::runtime
