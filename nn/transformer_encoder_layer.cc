#include "nn/transformer_encoder_layer.h"

#include "autograd/ops/elementwise.h"
#include "base/check.h"

namespace braid::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 double dropout, double layer_norm_eps, bool batch_first,
                                                 Generator* gen)
    : Module("TransformerEncoderLayer") {
  self_attn_ = register_module("self_attn",
                               std::make_shared<MultiheadAttention>(d_model, nhead, dropout, true, batch_first, gen));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward, true, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, gen));
  linear2_ = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model, true, gen));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(d_model, layer_norm_eps));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(dropout, gen));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(dropout, gen));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return encode(src); }

TensorList TransformerEncoderLayer::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(!inputs.empty() && inputs.size() <= 3,
                  "TransformerEncoderLayer: forward_many takes {{src[, src_mask[, src_key_padding_mask]]}}, got {} "
                  "tensors",
                  inputs.size());
  const Tensor none;
  return {encode(inputs[0], inputs.size() > 1 ? inputs[1] : none, inputs.size() > 2 ? inputs[2] : none)};
}

Tensor TransformerEncoderLayer::encode(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  // Children run through operator() so hooks on them (FSDP units, DDP) fire.
  const Tensor attended = (*self_attn_)(TensorList{src, src, src, src_mask, src_key_padding_mask})[0];
  Tensor x = (*norm1_)(autograd::add(src, (*dropout1_)(attended)));
  const Tensor ff = (*linear2_)((*dropout_)(autograd::relu((*linear1_)(x))));
  return (*norm2_)(autograd::add(x, (*dropout2_)(ff)));
}

}  // namespace braid::nn
