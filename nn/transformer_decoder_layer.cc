#include "nn/transformer_decoder_layer.h"

#include "autograd/ops/elementwise.h"
#include "base/check.h"

namespace braid::nn {

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 double dropout, double layer_norm_eps, bool batch_first,
                                                 Generator* gen)
    : Module("TransformerDecoderLayer") {
  self_attn_ = register_module("self_attn",
                               std::make_shared<MultiheadAttention>(d_model, nhead, dropout, true, batch_first, gen));
  multihead_attn_ = register_module(
      "multihead_attn", std::make_shared<MultiheadAttention>(d_model, nhead, dropout, true, batch_first, gen));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward, true, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, gen));
  linear2_ = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model, true, gen));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  norm3_ = register_module("norm3", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(dropout, gen));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(dropout, gen));
  dropout3_ = register_module("dropout3", std::make_shared<Dropout>(dropout, gen));
}

TensorList TransformerDecoderLayer::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(inputs.size() >= 2 && inputs.size() <= 6,
                  "TransformerDecoderLayer: forward_many takes {{tgt, memory[, tgt_mask[, memory_mask[, "
                  "tgt_key_padding_mask[, memory_key_padding_mask]]]]}}, got {} tensors",
                  inputs.size());
  auto at = [&](size_t i) { return i < inputs.size() ? inputs[i] : Tensor(); };
  return {decode(inputs[0], inputs[1], at(2), at(3), at(4), at(5))};
}

Tensor TransformerDecoderLayer::decode(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                       const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask) {
  // Children run through operator() so hooks on them (FSDP units, DDP) fire.
  const Tensor self = (*self_attn_)(TensorList{tgt, tgt, tgt, tgt_mask, tgt_key_padding_mask})[0];
  Tensor x = (*norm1_)(autograd::add(tgt, (*dropout1_)(self)));
  const Tensor cross =
      (*multihead_attn_)(TensorList{x, memory, memory, memory_mask, memory_key_padding_mask})[0];
  x = (*norm2_)(autograd::add(x, (*dropout2_)(cross)));
  const Tensor ff = (*linear2_)((*dropout_)(autograd::relu((*linear1_)(x))));
  return (*norm3_)(autograd::add(x, (*dropout3_)(ff)));
}

}  // namespace braid::nn
