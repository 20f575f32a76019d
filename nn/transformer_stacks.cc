#include "nn/transformer_stacks.h"

#include <utility>

#include "base/check.h"

namespace braid::nn {

namespace {

// Registers the layers as children "layers.0", "layers.1", ... (PyTorch's names).
template <class Layer>
void register_layers(const std::shared_ptr<ModuleList>& list,
                     const std::vector<std::shared_ptr<Layer>>& layers, const char* what) {
  for (const auto& layer : layers) {
    BRAID_CHECK_ARG(layer != nullptr, "{}: a layer is null", what);
    list->push_back(layer);
  }
}

}  // namespace

TransformerEncoder::TransformerEncoder(std::vector<std::shared_ptr<TransformerEncoderLayer>> layers,
                                       std::shared_ptr<LayerNorm> norm)
    : Module("TransformerEncoder"), layers_(std::move(layers)), norm_(std::move(norm)) {
  auto list = register_module("layers", std::make_shared<ModuleList>());
  register_layers(list, layers_, "TransformerEncoder");
  if (norm_) register_module("norm", norm_);
}

Tensor TransformerEncoder::forward(const Tensor& src) { return encode(src); }

TensorList TransformerEncoder::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(!inputs.empty() && inputs.size() <= 3,
                  "TransformerEncoder: forward_many takes {{src[, mask[, src_key_padding_mask]]}}, got {} tensors",
                  inputs.size());
  auto at = [&](size_t i) { return i < inputs.size() ? inputs[i] : Tensor(); };
  return {encode(inputs[0], at(1), at(2))};
}

Tensor TransformerEncoder::encode(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask) {
  Tensor x = src;
  // Through operator(), so a layer that is an FSDP unit gathers its parameters.
  for (const auto& layer : layers_) x = (*layer)(TensorList{x, mask, src_key_padding_mask})[0];
  return norm_ ? (*norm_)(x) : x;
}

TransformerDecoder::TransformerDecoder(std::vector<std::shared_ptr<TransformerDecoderLayer>> layers,
                                       std::shared_ptr<LayerNorm> norm)
    : Module("TransformerDecoder"), layers_(std::move(layers)), norm_(std::move(norm)) {
  auto list = register_module("layers", std::make_shared<ModuleList>());
  register_layers(list, layers_, "TransformerDecoder");
  if (norm_) register_module("norm", norm_);
}

TensorList TransformerDecoder::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(inputs.size() >= 2 && inputs.size() <= 6,
                  "TransformerDecoder: forward_many takes {{tgt, memory[, tgt_mask[, memory_mask[, "
                  "tgt_key_padding_mask[, memory_key_padding_mask]]]]}}, got {} tensors",
                  inputs.size());
  auto at = [&](size_t i) { return i < inputs.size() ? inputs[i] : Tensor(); };
  return {decode(inputs[0], inputs[1], at(2), at(3), at(4), at(5))};
}

Tensor TransformerDecoder::decode(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                  const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                  const Tensor& memory_key_padding_mask) {
  Tensor x = tgt;
  for (const auto& layer : layers_) {
    x = (*layer)(TensorList{x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask})[0];
  }
  return norm_ ? (*norm_)(x) : x;
}

}  // namespace braid::nn
