#include "nn/transformer.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "nn/init.h"

namespace braid::nn {

Transformer::Transformer(const TransformerOptions& options, Generator* gen)
    : Module("Transformer"), options_(options) {
  const TransformerOptions& o = options_;
  BRAID_CHECK_ARG(o.num_encoder_layers >= 0 && o.num_decoder_layers >= 0,
                  "Transformer: layer counts must be non-negative, got {} encoder and {} decoder layers",
                  o.num_encoder_layers, o.num_decoder_layers);
  std::vector<std::shared_ptr<TransformerEncoderLayer>> encoder_layers;
  for (int64_t i = 0; i < o.num_encoder_layers; ++i) {
    encoder_layers.push_back(std::make_shared<TransformerEncoderLayer>(
        o.d_model, o.nhead, o.dim_feedforward, o.dropout, o.layer_norm_eps, o.batch_first, gen));
  }
  std::vector<std::shared_ptr<TransformerDecoderLayer>> decoder_layers;
  for (int64_t i = 0; i < o.num_decoder_layers; ++i) {
    decoder_layers.push_back(std::make_shared<TransformerDecoderLayer>(
        o.d_model, o.nhead, o.dim_feedforward, o.dropout, o.layer_norm_eps, o.batch_first, gen));
  }
  encoder_ = register_module("encoder", std::make_shared<TransformerEncoder>(
                                            std::move(encoder_layers),
                                            std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps)));
  decoder_ = register_module("decoder", std::make_shared<TransformerDecoder>(
                                            std::move(decoder_layers),
                                            std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps)));
  for (const Tensor& p : parameters()) {
    if (p.dim() < 2) continue;
    const auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(p);
    const double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    init::uniform_(p, -bound, bound, gen);
  }
}

TensorList Transformer::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(inputs.size() >= 2 && inputs.size() <= 8,
                  "Transformer: forward_many takes {{src, tgt[, src_mask[, tgt_mask[, memory_mask[, "
                  "src_key_padding_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]]]}}, got {} tensors",
                  inputs.size());
  auto at = [&](size_t i) { return i < inputs.size() ? inputs[i] : Tensor(); };
  const Tensor& src = inputs[0];
  const Tensor& tgt = inputs[1];
  const int64_t batch_dim = options_.batch_first ? 0 : 1;
  BRAID_CHECK_ARG(src.dim() == 3 && tgt.dim() == 3 && src.size(batch_dim) == tgt.size(batch_dim),
                  "Transformer: src {} and tgt {} must be 3-D with the same batch size", shape_str(src.shape()),
                  shape_str(tgt.shape()));
  BRAID_CHECK_ARG(src.size(2) == options_.d_model && tgt.size(2) == options_.d_model,
                  "Transformer: the feature size of src {} and tgt {} must be d_model {}", shape_str(src.shape()),
                  shape_str(tgt.shape()), options_.d_model);
  const Tensor memory = (*encoder_)(TensorList{src, at(2), at(5)})[0];
  return (*decoder_)(TensorList{tgt, memory, at(3), at(4), at(6), at(7)});
}

}  // namespace braid::nn
