// nn::TransformerEncoderLayer, as torch.nn.TransformerEncoderLayer with its defaults (post-norm, relu):
//   x = norm1(x + dropout1(self_attn(x, x, x)))
//   x = norm2(x + dropout2(linear2(dropout(relu(linear1(x))))))
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

class TransformerEncoderLayer : public Module {
 public:
  // Draws weights (self_attn, then linear1, then linear2) and dropout masks from `gen`, or the default
  // generator when null; `gen` must outlive the layer.
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.1,
                          double layer_norm_eps = 1e-5, bool batch_first = false, Generator* gen = nullptr);

  Tensor forward(const Tensor& src) override;
  // {src[, src_mask[, src_key_padding_mask]]} -> {output}; masks as MultiheadAttention's, undefined = none.
  TensorList forward_many(const TensorList& inputs) override;
  Tensor encode(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor());

  const std::shared_ptr<MultiheadAttention>& self_attn() const { return self_attn_; }

 private:
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Linear> linear2_;
  std::shared_ptr<LayerNorm> norm1_;
  std::shared_ptr<LayerNorm> norm2_;
  std::shared_ptr<Dropout> dropout1_;
  std::shared_ptr<Dropout> dropout2_;
};

}  // namespace braid::nn
