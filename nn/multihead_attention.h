// nn::MultiheadAttention, as torch.nn.MultiheadAttention (kdim == vdim == embed_dim):
//   out = concat_h(softmax(Q_h K_h^T / sqrt(head_dim) + mask) V_h) W_o^T + b_o
// with Q, K, V projected through one packed in_proj_weight [3E, E] (rows: q, then k, then v) and
// in_proj_bias [3E], and out_proj a Linear(E, E) child — the same names and layout as PyTorch, so state
// dicts move between the two.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "tensor/random.h"

namespace braid::nn {

class MultiheadAttention : public Module {
 public:
  // embed_dim must be divisible by num_heads. dropout applies to the attention weights in training mode.
  // batch_first: inputs and outputs are [N, L, E] rather than [L, N, E].
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, Generator* gen = nullptr);

  // Self-attention: query = key = value = input, no masks; returns the attention output only.
  Tensor forward(const Tensor& input) override;
  // {input} -> {self-attention output}, or
  // {query, key, value[, attn_mask[, key_padding_mask]]} -> {output, weights averaged over heads [N, L, S]}.
  // An undefined mask tensor means none. attn_mask is [L, S] or [N * num_heads, L, S]; key_padding_mask
  // is [N, S]. A bool mask marks positions that may NOT be attended (true -> -inf); a floating mask is
  // added to the scores. Masks carry no gradient.
  TensorList forward_many(const TensorList& inputs) override;
  // The same as forward_many, spelled out.
  TensorList attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = Tensor(),
                    const Tensor& key_padding_mask = Tensor());

  // in_proj_weight ~ xavier_uniform, in_proj_bias and out_proj.bias = 0, out_proj.weight as Linear.
  void reset_parameters(Generator* gen = nullptr);

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  bool batch_first() const { return batch_first_; }
  const Tensor& in_proj_weight() const { return in_proj_weight_; }
  // Undefined when constructed with bias = false.
  const Tensor& in_proj_bias() const { return in_proj_bias_; }
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }

 private:
  int64_t embed_dim_;
  int64_t num_heads_;
  double dropout_p_;
  bool batch_first_;
  Generator* gen_;
  Tensor in_proj_weight_;
  Tensor in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
};

// The float mask [size, size] with 0 on and below the diagonal and -inf above it, so position i attends
// only to positions <= i (torch.nn.Transformer.generate_square_subsequent_mask).
Tensor generate_square_subsequent_mask(int64_t size, DType dtype = DType::Float32);

}  // namespace braid::nn
