// MultiheadAttention and the Transformer layers: shapes, hand-checked attention, masks, batch_first, and
// float64 gradchecks of every input and parameter.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "nn/multihead_attention.h"
#include "nn/transformer.h"
#include "nn/transformer_decoder_layer.h"
#include "nn/transformer_encoder_layer.h"
#include "tensor/factory.h"
#include "tensor/random.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using testing::check_close;
using testing::set_values;
using testing::values_of;

Tensor random_input(const Shape& shape, uint64_t seed, DType dtype = DType::Float32) {
  Generator gen(seed);
  return randn(shape, dtype, &gen);
}

Tensor grad_leaf(const Shape& shape, uint64_t seed) {
  Tensor t = random_input(shape, seed, DType::Float64);
  autograd::set_requires_grad(t);
  return t;
}

// One head, E = 2, every projection the identity and every bias zero: out = softmax(q k^T / sqrt(2)) v.
std::shared_ptr<MultiheadAttention> identity_attention() {
  auto mha = std::make_shared<MultiheadAttention>(2, 1);
  set_values(mha->in_proj_weight(), {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1});
  set_values(mha->in_proj_bias(), {0, 0, 0, 0, 0, 0});
  set_values(mha->out_proj()->weight(), {1, 0, 0, 1});
  set_values(mha->out_proj()->bias(), {0, 0});
  return mha;
}

void require_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  const auto result = autograd::gradcheck(fn, in);
  INFO(result.message);
  REQUIRE(result.ok);
}

TEST_CASE("MultiheadAttention has PyTorch's parameter names, shapes and initial biases") {
  MultiheadAttention mha(8, 2);
  std::vector<std::string> names;
  for (const auto& [name, p] : mha.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK(mha.in_proj_weight().shape() == Shape{24, 8});
  for (double v : values_of(mha.in_proj_bias())) CHECK(v == 0.0);
  for (double v : values_of(mha.out_proj()->bias())) CHECK(v == 0.0);
  const double bound = std::sqrt(6.0 / (24 + 8));
  for (double v : values_of(mha.in_proj_weight())) CHECK(std::abs(v) <= bound);
  CHECK_THROWS_WITH(MultiheadAttention(6, 4), Catch::Contains("not divisible"));
}

TEST_CASE("MultiheadAttention output and weight shapes, sequence-first and batch-first") {
  MultiheadAttention mha(8, 2);
  const Tensor q = random_input({3, 2, 8}, 1);   // [L, N, E]
  const Tensor kv = random_input({5, 2, 8}, 2);  // [S, N, E]
  const TensorList out = mha(TensorList{q, kv, kv});
  CHECK(out[0].shape() == Shape{3, 2, 8});
  CHECK(out[1].shape() == Shape{2, 3, 5});
  CHECK(mha(q).shape() == Shape{3, 2, 8});
  CHECK_THROWS_WITH(mha(TensorList{q, kv, random_input({4, 2, 8}, 3)}), Catch::Contains("do not match"));
}

TEST_CASE("MultiheadAttention batch_first gives the transposed result of the same weights") {
  MultiheadAttention seq_first(4, 2, 0.0, true, false);
  MultiheadAttention batch_first(4, 2, 0.0, true, true);
  batch_first.load_state_dict(seq_first.state_dict());
  const Tensor x = random_input({3, 2, 4}, 5);
  const Tensor want = seq_first(x);
  const Tensor got = batch_first(x.transpose(0, 1).contiguous());
  check_close(values_of(got.transpose(0, 1).contiguous()), values_of(want));
}

TEST_CASE("MultiheadAttention with identity projections is softmax(q k^T / sqrt(d)) v") {
  auto mha = identity_attention();
  const Tensor q = from_vector<float>({1, 0}, {1, 1, 2});
  const Tensor kv = from_vector<float>({1, 0, 0, 1}, {2, 1, 2});
  const TensorList out = (*mha)(TensorList{q, kv, kv});
  const double e = std::exp(1.0 / std::sqrt(2.0));
  const double w0 = e / (e + 1.0);
  check_close(values_of(out[0]), {w0, 1.0 - w0});
  check_close(values_of(out[1]), {w0, 1.0 - w0});
}

TEST_CASE("MultiheadAttention masks: causal float mask, bool attn_mask and key_padding_mask") {
  auto mha = identity_attention();
  const Tensor x = from_vector<float>({1, 0, 0, 1}, {2, 1, 2});
  SECTION("the causal mask lets the first position see only itself") {
    const Tensor mask = generate_square_subsequent_mask(2);
    const std::vector<double> m = values_of(mask);
    CHECK((m[0] == 0.0 && std::isinf(m[1]) && m[1] < 0 && m[2] == 0.0 && m[3] == 0.0));
    const TensorList out = (*mha)(TensorList{x, x, x, mask});
    const double e = std::exp(1.0 / std::sqrt(2.0));
    check_close(values_of(out[0]), {1, 0, 1.0 / (e + 1.0), e / (e + 1.0)});
  }
  SECTION("a bool attn_mask masks where true") {
    const Tensor mask = from_vector<bool>({false, true, false, false}, {2, 2});
    const TensorList out = (*mha)(TensorList{x, x, x, mask});
    const double e = std::exp(1.0 / std::sqrt(2.0));
    check_close(values_of(out[0]), {1, 0, 1.0 / (e + 1.0), e / (e + 1.0)});
  }
  SECTION("key_padding_mask hides a key from every query") {
    const Tensor pad = from_vector<bool>({false, true}, {1, 2});
    const TensorList out = (*mha)(TensorList{x, x, x, Tensor(), pad});
    check_close(values_of(out[0]), {1, 0, 1, 0});
  }
  SECTION("masks of the wrong shape are refused") {
    CHECK_THROWS_WITH((*mha)(TensorList{x, x, x, generate_square_subsequent_mask(3)}),
                      Catch::Contains("attn_mask must be"));
  }
}

TEST_CASE("MultiheadAttention gradcheck in float64 over inputs, parameters and a causal mask") {
  Generator gen(7);
  MultiheadAttention mha(4, 2, 0.0, true, false, &gen);
  mha.to(DType::Float64);
  const Tensor mask = generate_square_subsequent_mask(3, DType::Float64);
  const std::vector<Tensor> inputs = {grad_leaf({3, 2, 4}, 11), grad_leaf({3, 2, 4}, 12), grad_leaf({3, 2, 4}, 13),
                                      mha.in_proj_weight(), mha.in_proj_bias(), mha.out_proj()->weight(),
                                      mha.out_proj()->bias()};
  require_gradcheck([&](const std::vector<Tensor>& in) { return mha.attend(in[0], in[1], in[2], mask)[0]; }, inputs);
}

TEST_CASE("TransformerEncoderLayer: PyTorch's names, shapes and a float64 gradcheck") {
  Generator gen(3);
  TransformerEncoderLayer layer(4, 2, 6, 0.0, 1e-5, false, &gen);
  std::vector<std::string> names;
  for (const auto& [name, p] : layer.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                          "self_attn.out_proj.weight", "self_attn.out_proj.bias", "linear1.weight",
                                          "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight",
                                          "norm1.bias", "norm2.weight", "norm2.bias"});
  layer.to(DType::Float64);
  std::vector<Tensor> inputs = {grad_leaf({3, 2, 4}, 21)};
  for (const Tensor& p : layer.parameters()) inputs.push_back(p);
  const Tensor mask = generate_square_subsequent_mask(3, DType::Float64);
  require_gradcheck([&](const std::vector<Tensor>& in) { return layer.encode(in[0], mask); }, inputs);
  CHECK(layer(inputs[0]).shape() == Shape{3, 2, 4});
}

TEST_CASE("TransformerDecoderLayer: shapes and a float64 gradcheck over tgt, memory and parameters") {
  Generator gen(4);
  TransformerDecoderLayer layer(4, 2, 6, 0.0, 1e-5, false, &gen);
  CHECK(layer.named_parameters().size() == 18);
  layer.to(DType::Float64);
  std::vector<Tensor> inputs = {grad_leaf({3, 2, 4}, 31), grad_leaf({5, 2, 4}, 32)};
  for (const Tensor& p : layer.parameters()) inputs.push_back(p);
  const Tensor mask = generate_square_subsequent_mask(3, DType::Float64);
  require_gradcheck([&](const std::vector<Tensor>& in) { return layer.decode(in[0], in[1], mask); }, inputs);
}

TEST_CASE("Transformer: PyTorch's structure, output shape and a float64 gradcheck") {
  Generator gen(5);
  TransformerOptions options;
  options.d_model = 4;
  options.nhead = 2;
  options.num_encoder_layers = 2;
  options.num_decoder_layers = 1;
  options.dim_feedforward = 6;
  options.dropout = 0.0;
  Transformer model(options, &gen);
  const Tensor probe = model.parameter("encoder.layers.1.linear2.weight");
  CHECK(probe.shape() == Shape{4, 6});
  CHECK(model.parameter("decoder.norm.weight").shape() == Shape{4});
  CHECK(model.parameter("decoder.layers.0.multihead_attn.in_proj_weight").shape() == Shape{12, 4});
  CHECK(model.named_parameters().size() == 2 * 12 + 2 + 18 + 2);

  model.to(DType::Float64);
  std::vector<Tensor> inputs = {grad_leaf({5, 2, 4}, 41), grad_leaf({3, 2, 4}, 42)};
  for (const Tensor& p : model.parameters()) inputs.push_back(p);
  const Tensor tgt_mask = generate_square_subsequent_mask(3, DType::Float64);
  auto fn = [&](const std::vector<Tensor>& in) {
    return model(TensorList{in[0], in[1], Tensor(), tgt_mask})[0];
  };
  CHECK(fn(inputs).shape() == Shape{3, 2, 4});
  require_gradcheck(fn, inputs);
}

}  // namespace
}  // namespace braid::nn
