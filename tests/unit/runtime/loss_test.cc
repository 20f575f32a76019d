// The job file's losses (runtime/models/loss.h) against values worked out by hand, their gradients, and
// their shape and dtype errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "base/error.h"
#include "runtime/models/loss.h"
#include "tensor/compare.h"
#include "tensor/factory.h"

namespace braid::runtime {

namespace {

using Catch::Matchers::Contains;

Tensor leaf(std::vector<float> values, Shape shape) {
  Tensor t = from_vector(values, shape);
  autograd::set_requires_grad(t);
  return t;
}

Tensor leaf64(std::vector<double> values, Shape shape) {
  Tensor t = from_vector(values, shape);
  autograd::set_requires_grad(t);
  return t;
}

}  // namespace

TEST_CASE("loss: weighted_sum broadcasts output [B, 1] against values [N] as PyTorch does", "[loss]") {
  // (output * values).sum() with output [2, 1] and values [3]: the product is [2, 3], so the loss is
  // sum(output) * sum(values) = 3 * 6, and each output row's gradient is sum(values).
  const Tensor out = leaf({1, 2}, {2, 1});
  const Tensor values = from_vector(std::vector<float>{1, 2, 3}, {3});
  const Tensor loss = compute_loss(LossKind::WeightedSum, out, values);
  CHECK(loss.dim() == 0);
  CHECK(loss.item<double>() == 18.0);
  autograd::backward(loss);
  CHECK(equal(autograd::grad(out), from_vector(std::vector<float>{6, 6}, {2, 1})));

  // Trainer 0 of the hybrid job (PyTorch's ddp_under_dist_autograd_test.py, mode NONE): output
  // [[-3.5], [-3.5], [3.5], [3.5]] and values all -1. The
  // products are [4, 4], so every output row's gradient is sum(values) = -4 (a row-wise weighting would
  // give -1).
  const Tensor hybrid_out = leaf({-3.5f, -3.5f, 3.5f, 3.5f}, {4, 1});
  const Tensor hybrid_loss = compute_loss(LossKind::WeightedSum, hybrid_out, full({4}, -1.0f));
  CHECK(hybrid_loss.item<double>() == 0.0);
  autograd::backward(hybrid_loss);
  CHECK(equal(autograd::grad(hybrid_out), full({4, 1}, -4.0f)));
  // Where the two readings differ in value: row-wise [1, 2] . [3, 5] = 13, broadcast 3 * 8 = 24.
  CHECK(compute_loss(LossKind::WeightedSum, leaf({1, 2}, {2, 1}), from_vector(std::vector<float>{3, 5}, {2}))
            .item<double>() == 24.0);
  // Same shapes multiply elementwise.
  CHECK(compute_loss(LossKind::WeightedSum, leaf({1, 2}, {2}), from_vector(std::vector<float>{3, 5}, {2}))
            .item<double>() == 13.0);
  CHECK_THROWS_WITH(compute_loss(LossKind::WeightedSum, leaf({1, 2, 3, 4, 5, 6}, {2, 3}), full({2}, 1.0f)),
                    "weighted_sum: output float32[2, 3] cpu and target float32[2] cpu do not broadcast together");
}

TEST_CASE("loss: cross_entropy is the batch mean with softmax-minus-one-hot gradients", "[loss]") {
  const Tensor logits = leaf({0, 0, 0, 1, 2, 3}, {2, 3});
  const Tensor target = from_vector(std::vector<int64_t>{0, 2}, {2});
  const Tensor loss = compute_loss(LossKind::CrossEntropy, logits, target);
  // Row 0: ln 3. Row 1: logsumexp(1, 2, 3) - 3.
  const double row1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  CHECK(loss.item<double>() == Approx((std::log(3.0) + row1) / 2).epsilon(1e-6));
  autograd::backward(loss);
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), z = e1 + e2 + e3;
  const Tensor expected = from_vector(
      std::vector<float>{static_cast<float>((1.0 / 3 - 1) / 2), static_cast<float>(1.0 / 6), static_cast<float>(1.0 / 6),
                         static_cast<float>(e1 / z / 2), static_cast<float>(e2 / z / 2), static_cast<float>((e3 / z - 1) / 2)},
      {2, 3});
  CHECK(allclose(autograd::grad(logits), expected, 1e-5, 1e-6));

  // The gradient agrees with finite differences (float64), and int32 targets are accepted.
  const Tensor target32 = from_vector(std::vector<int32_t>{1, 0, 2}, {3});
  const auto result = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return compute_loss(LossKind::CrossEntropy, in[0], target32); },
      {leaf64({0.1, -0.4, 0.3, 1.2, 0.0, -0.7, 0.5, 0.5, 2.0}, {3, 3})});
  CHECK(result.ok);
  INFO(result.message);

  CHECK_THROWS_WITH(compute_loss(LossKind::CrossEntropy, leaf({0, 0, 0, 0}, {2, 2}), from_vector(std::vector<int64_t>{0, 1, 1}, {3})),
                    "cross_entropy: expected output [N, C] and target [N], got output float32[2, 2] cpu and target "
                    "int64[3] cpu");
  CHECK_THROWS_WITH(compute_loss(LossKind::CrossEntropy, leaf({0, 0, 0, 0}, {2, 2}), full({2}, 1.0f)),
                    Contains("cross_entropy: the target must hold integer class indices"));
}

TEST_CASE("loss: mse is the mean squared difference; a [N, 1] head takes [N] targets", "[loss]") {
  const Tensor out = leaf({1, 2, 4}, {3, 1});
  const Tensor target = from_vector(std::vector<double>{0, 2, 1}, {3});  // float64: converted to float32
  const Tensor loss = compute_loss(LossKind::Mse, out, target);
  CHECK(loss.item<double>() == Approx((1.0 + 0.0 + 9.0) / 3));
  autograd::backward(loss);
  // d/d out = 2 (out - target) / N.
  CHECK(allclose(autograd::grad(out), from_vector(std::vector<float>{2.0f / 3, 0, 2.0f}, {3, 1})));
  CHECK(compute_loss(LossKind::Mse, leaf({1, 2}, {2}), full({2}, 1.0f)).item<double>() == Approx(0.5));
  CHECK_THROWS_WITH(compute_loss(LossKind::Mse, leaf({1, 2, 3, 4}, {2, 2}), full({2, 3}, 1.0f)),
                    "mse: expected the same shape, got output float32[2, 2] cpu and target float32[2, 3] cpu");
  CHECK_THROWS_WITH(compute_loss(LossKind::Mse, from_vector(std::vector<int64_t>{1}, {1}), full({1}, 1.0f)),
                    Contains("mse: the output must be floating point"));
  CHECK_THROWS_AS(compute_loss(LossKind::Mse, Tensor(), full({1}, 1.0f)), InvalidArgument);
}

TEST_CASE("loss: accuracy counts the rows whose largest logit is the target", "[loss]") {
  const Tensor logits = from_vector(std::vector<float>{0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f, 0.6f, 0.4f}, {4, 2});
  CHECK(accuracy(logits, from_vector(std::vector<int64_t>{1, 0, 1, 1}, {4})) == 0.75);
  CHECK(accuracy(logits, from_vector(std::vector<int64_t>{0, 1, 0, 1}, {4})) == 0.0);
  CHECK_THROWS_WITH(accuracy(logits, from_vector(std::vector<int64_t>{1, 0}, {2})),
                    Contains("accuracy: expected output [N, C] and target [N]"));
  CHECK_THROWS_WITH(accuracy(zeros({0, 2}), zeros({0}, DType::Int64)), Contains("accuracy: the batch is empty"));
}

}  // namespace braid::runtime
