#include "nn/multihead_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "base/check.h"
#include "nn/init.h"
#include "tensor/factory.h"

namespace braid::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A mask's values as additive scores: a bool mask's true becomes -inf (and false 0); a floating mask is
// taken as it is.
std::vector<double> additive_values(const Tensor& mask) {
  std::vector<double> values = to_vector<double>(mask.to(DType::Float64));
  if (mask.dtype() == DType::Bool) {
    for (double& v : values) v = v != 0.0 ? kNegInf : 0.0;
  }
  return values;
}

void check_mask_dtype(const Tensor& mask, const char* what) {
  BRAID_CHECK_ARG(mask.dtype() == DType::Bool || is_floating(mask.dtype()),
                  "MultiheadAttention: {} must be bool or floating, got {}", what, dtype_name(mask.dtype()));
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       bool batch_first, Generator* gen)
    : Module("MultiheadAttention"),
      embed_dim_(embed_dim),
      num_heads_(num_heads),
      dropout_p_(dropout),
      batch_first_(batch_first),
      gen_(gen) {
  BRAID_CHECK_ARG(embed_dim > 0 && num_heads > 0, "MultiheadAttention: embed_dim {} and num_heads {} must be positive",
                  embed_dim, num_heads);
  BRAID_CHECK_ARG(embed_dim % num_heads == 0, "MultiheadAttention: embed_dim {} is not divisible by num_heads {}",
                  embed_dim, num_heads);
  BRAID_CHECK_ARG(dropout >= 0.0 && dropout <= 1.0, "MultiheadAttention: dropout must be in [0, 1], got {}", dropout);
  // Registration order is PyTorch's: in_proj_weight, in_proj_bias, then out_proj.
  in_proj_weight_ = register_parameter("in_proj_weight", Tensor::empty({3 * embed_dim, embed_dim}));
  if (bias) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::empty({3 * embed_dim}));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, gen));
  reset_parameters(gen);
}

void MultiheadAttention::reset_parameters(Generator* gen) {
  // xavier_uniform: U(-b, b), b = sqrt(6 / (fan_in + fan_out)).
  const auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(in_proj_weight_);
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  init::uniform_(in_proj_weight_, -bound, bound, gen);
  out_proj_->reset_parameters(gen);
  if (in_proj_bias_.defined()) {
    init::zeros_(in_proj_bias_);
    init::zeros_(out_proj_->bias());
  }
}

Tensor MultiheadAttention::forward(const Tensor& input) { return attend(input, input, input)[0]; }

TensorList MultiheadAttention::forward_many(const TensorList& inputs) {
  // One input is self-attention with one output, which is how operator()(Tensor) arrives here.
  if (inputs.size() == 1) return {attend(inputs[0], inputs[0], inputs[0])[0]};
  BRAID_CHECK_ARG(inputs.size() >= 3 && inputs.size() <= 5,
                  "MultiheadAttention: forward_many takes {{input}} or {{query, key, value[, attn_mask[, "
                  "key_padding_mask]]}}, got {} tensors",
                  inputs.size());
  const Tensor none;
  return attend(inputs[0], inputs[1], inputs[2], inputs.size() > 3 ? inputs[3] : none,
                inputs.size() > 4 ? inputs[4] : none);
}

TensorList MultiheadAttention::attend(const Tensor& query_in, const Tensor& key_in, const Tensor& value_in,
                                      const Tensor& attn_mask, const Tensor& key_padding_mask) {
  const int64_t E = embed_dim_;
  const int64_t H = num_heads_;
  const int64_t hd = E / H;
  BRAID_CHECK_ARG(query_in.dim() == 3 && key_in.dim() == 3 && value_in.dim() == 3,
                  "MultiheadAttention: query, key and value must be 3-D ({}), got {}, {} and {}",
                  batch_first_ ? "[N, L, E]" : "[L, N, E]", shape_str(query_in.shape()), shape_str(key_in.shape()),
                  shape_str(value_in.shape()));
  // Computed in the sequence-first layout [L, N, E], as PyTorch does.
  const Tensor query = batch_first_ ? autograd::transpose(query_in, 0, 1) : query_in;
  const Tensor key = batch_first_ ? autograd::transpose(key_in, 0, 1) : key_in;
  const Tensor value = batch_first_ ? autograd::transpose(value_in, 0, 1) : value_in;
  const int64_t L = query.size(0);
  const int64_t N = query.size(1);
  const int64_t S = key.size(0);
  BRAID_CHECK_ARG(query.size(2) == E && key.size(2) == E && value.size(2) == E,
                  "MultiheadAttention: the embedding dim of query, key and value must be embed_dim {}", E);
  BRAID_CHECK_ARG(key.size(1) == N && value.size(1) == N && value.size(0) == S,
                  "MultiheadAttention: key {} and value {} do not match query {} in batch or source length",
                  shape_str(key_in.shape()), shape_str(value_in.shape()), shape_str(query_in.shape()));

  auto project = [&](const Tensor& x, int64_t which) {
    const Tensor w = autograd::narrow(in_proj_weight_, 0, which * E, E);
    const Tensor b = in_proj_bias_.defined() ? autograd::narrow(in_proj_bias_, 0, which * E, E) : Tensor();
    // [len, N, E] -> [len, N * H, hd] -> [N * H, len, hd]: head h of batch n is row n * H + h.
    const Tensor y = autograd::linear(x, w, b);
    return autograd::transpose(autograd::reshape(y, {x.size(0), N * H, hd}), 0, 1);
  };
  const Tensor q = autograd::mul(project(query, 0), 1.0 / std::sqrt(static_cast<double>(hd)));
  const Tensor k = project(key, 1);
  const Tensor v = project(value, 2);

  Tensor scores = autograd::bmm(q, autograd::transpose(k, 1, 2));  // [N * H, L, S]
  if (attn_mask.defined()) {
    check_mask_dtype(attn_mask, "attn_mask");
    const bool per_head = attn_mask.dim() == 3;
    BRAID_CHECK_ARG((attn_mask.dim() == 2 && attn_mask.size(0) == L && attn_mask.size(1) == S) ||
                        (per_head && attn_mask.size(0) == N * H && attn_mask.size(1) == L && attn_mask.size(2) == S),
                    "MultiheadAttention: attn_mask must be [L, S] = [{}, {}] or [N * num_heads, L, S] = [{}, {}, {}], "
                    "got {}",
                    L, S, N * H, L, S, shape_str(attn_mask.shape()));
    const Tensor add = from_vector(additive_values(attn_mask), attn_mask.shape()).to(scores.dtype());
    scores = autograd::add(scores, add);
  }
  if (key_padding_mask.defined()) {
    check_mask_dtype(key_padding_mask, "key_padding_mask");
    BRAID_CHECK_ARG(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == N && key_padding_mask.size(1) == S,
                    "MultiheadAttention: key_padding_mask must be [N, S] = [{}, {}], got {}", N, S,
                    shape_str(key_padding_mask.shape()));
    // [N, S] -> [N * H, 1, S]: every head of batch n shares row n.
    const std::vector<double> row_values = additive_values(key_padding_mask);
    std::vector<double> per_head(static_cast<size_t>(N * H * S));
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t s = 0; s < S; ++s) per_head[static_cast<size_t>((n * H + h) * S + s)] = row_values[n * S + s];
      }
    }
    scores = autograd::add(scores, from_vector(per_head, {N * H, 1, S}).to(scores.dtype()));
  }
  Tensor weights = autograd::softmax(scores, -1);
  if (dropout_p_ > 0.0) weights = autograd::dropout(weights, dropout_p_, is_training(), gen_);

  const Tensor heads = autograd::bmm(weights, v);  // [N * H, L, hd]
  const Tensor merged = autograd::reshape(autograd::transpose(heads, 0, 1), {L, N, E});
  Tensor output = (*out_proj_)(merged);
  if (batch_first_) output = autograd::transpose(output, 0, 1);
  const Tensor mean_weights = autograd::mean(autograd::reshape(weights, {N, H, L, S}), {1});
  return {output, mean_weights};
}

Tensor generate_square_subsequent_mask(int64_t size, DType dtype) {
  BRAID_CHECK_ARG(size >= 0, "generate_square_subsequent_mask: size must be non-negative, got {}", size);
  std::vector<double> values(static_cast<size_t>(size * size), 0.0);
  for (int64_t i = 0; i < size; ++i) {
    for (int64_t j = i + 1; j < size; ++j) values[static_cast<size_t>(i * size + j)] = kNegInf;
  }
  return from_vector(values, {size, size}).to(dtype);
}

}  // namespace braid::nn
