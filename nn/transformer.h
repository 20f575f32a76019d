// nn::Transformer, as torch.nn.Transformer: an encoder ("encoder": TransformerEncoder with a final
// LayerNorm) over the source and a decoder ("decoder": TransformerDecoder with a final LayerNorm) over
// the target that attends to the encoder's output. Same defaults and child names as PyTorch.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/module.h"
#include "nn/transformer_stacks.h"
#include "tensor/random.h"

namespace braid::nn {

struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
};

class Transformer : public Module {
 public:
  // Builds the layers from `gen` (or the default generator), then re-draws every parameter of 2 or more
  // dims with xavier_uniform, as PyTorch's _reset_parameters. `gen` must outlive the module (dropout).
  explicit Transformer(const TransformerOptions& options = {}, Generator* gen = nullptr);

  // {src, tgt[, src_mask[, tgt_mask[, memory_mask[, src_key_padding_mask[, tgt_key_padding_mask[,
  // memory_key_padding_mask]]]]]]} (PyTorch's order) -> {output}, shaped as tgt.
  TensorList forward_many(const TensorList& inputs) override;

  const TransformerOptions& options() const { return options_; }
  const std::shared_ptr<TransformerEncoder>& encoder() const { return encoder_; }
  const std::shared_ptr<TransformerDecoder>& decoder() const { return decoder_; }

 private:
  TransformerOptions options_;
  std::shared_ptr<TransformerEncoder> encoder_;
  std::shared_ptr<TransformerDecoder> decoder_;
};

}  // namespace braid::nn
