// nn::TransformerDecoderLayer, as torch.nn.TransformerDecoderLayer with its defaults (post-norm, relu):
//   x = norm1(x + dropout1(self_attn(x, x, x, tgt_mask)))
//   x = norm2(x + dropout2(multihead_attn(x, memory, memory, memory_mask)))
//   x = norm3(x + dropout3(linear2(dropout(relu(linear1(x))))))
// Children carry PyTorch's names, so state dicts match.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/multihead_attention.h"
#include "nn/normalization.h"
#include "tensor/random.h"

namespace braid::nn {

class TransformerDecoderLayer : public Module {
 public:
  // Draws weights (self_attn, multihead_attn, linear1, linear2) and dropout masks from `gen`, or the
  // default generator when null; `gen` must outlive the layer.
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.1,
                          double layer_norm_eps = 1e-5, bool batch_first = false, Generator* gen = nullptr);

  // {tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]} -> {output};
  // masks as MultiheadAttention's, an undefined one means none.
  TensorList forward_many(const TensorList& inputs) override;
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                const Tensor& memory_key_padding_mask = Tensor());

 private:
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<MultiheadAttention> multihead_attn_;
  std::shared_ptr<Linear> linear1_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Linear> linear2_;
  std::shared_ptr<LayerNorm> norm1_;
  std::shared_ptr<LayerNorm> norm2_;
  std::shared_ptr<LayerNorm> norm3_;
  std::shared_ptr<Dropout> dropout1_;
  std::shared_ptr<Dropout> dropout2_;
  std::shared_ptr<Dropout> dropout3_;
};

}  // namespace braid::nn
