// nn::TransformerEncoder and nn::TransformerDecoder, as torch.nn's: a ModuleList "layers" of layers run
// in order, then an optional final LayerNorm "norm". Unlike PyTorch, which deep-copies one layer
// num_layers times, they take the layers already built (each with its own weights).
#pragma once

#include <memory>
#include <vector>

#include "nn/container.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/transformer_decoder_layer.h"
#include "nn/transformer_encoder_layer.h"

namespace braid::nn {

class TransformerEncoder : public Module {
 public:
  // norm may be null (no final normalisation).
  TransformerEncoder(std::vector<std::shared_ptr<TransformerEncoderLayer>> layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);

  Tensor forward(const Tensor& src) override;
  // {src[, mask[, src_key_padding_mask]]} -> {output}.
  TensorList forward_many(const TensorList& inputs) override;
  Tensor encode(const Tensor& src, const Tensor& mask = Tensor(), const Tensor& src_key_padding_mask = Tensor());

  size_t num_layers() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

class TransformerDecoder : public Module {
 public:
  // norm may be null (no final normalisation).
  TransformerDecoder(std::vector<std::shared_ptr<TransformerDecoderLayer>> layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);

  // {tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]} -> {output}.
  TensorList forward_many(const TensorList& inputs) override;
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                const Tensor& memory_key_padding_mask = Tensor());

  size_t num_layers() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

}  // namespace braid::nn
