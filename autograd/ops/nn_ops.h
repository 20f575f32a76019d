// Differentiable neural-network functions: softmax family, losses, normalisation, dropout, embeddings.
#pragma once

#include <optional>
#include <string>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace braid::autograd {

enum class Reduction { None, Mean, Sum };

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// input [N, C] log-probabilities, target int64 [N] class indices.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean);
// input [N, C] logits, target int64 [N] class indices.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// Normalises over the trailing `normalized_shape` dims; weight/bias optional (elementwise affine).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// torch.nn.functional.batch_norm: input [N, C, *] normalised per channel C over every other dim. Training:
// the batch's statistics, and running_mean/running_var (when defined) move toward them by `momentum`
// (the variance unbiased, as torch's); otherwise the running statistics. weight/bias optional [C].
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps);
// The dims a batch norm reduces over ({0, 2, 3, ...}) and the shape [1, C, 1, ...] its per-channel tensors
// broadcast from, for an input of `x`'s rank.
Shape batch_norm_dims(const Tensor& x);
Shape batch_norm_channel_shape(const Tensor& x);

// Zeroes elements with probability p and scales the rest by 1/(1-p) when training; identity otherwise.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

// weight [V, D] looked up at int64 indices of any shape -> [*indices.shape, D].
Tensor embedding(const Tensor& weight, const Tensor& indices);

enum class EmbeddingBagMode { Sum, Mean, Max };
// Bags of rows of weight [V, D]: `input` int64 1-D indices, `offsets` int64 [B] start of each bag ->
// [B, D]. per_sample_weights (same length as input) scale rows, with mode Sum only. Empty bags give 0.
// With `sparse`, the weight's gradient is a sparse COO tensor with one row per looked-up index
// (uncoalesced, as PyTorch's sparse=True); not with mode Max.
Tensor embedding_bag(const Tensor& weight, const Tensor& input, const Tensor& offsets, EmbeddingBagMode mode,
                     const Tensor& per_sample_weights = Tensor(), bool sparse = false);

}  // namespace braid::autograd
