// braid's MultiheadAttention and Transformer replay PyTorch 1.13's: tests/fixtures/transformer_reference.json
// (written by tests/fixtures/make_transformer_fixtures.py with torch) holds float64 weights by state-dict
// name, inputs, and the outputs and input gradients (of the output's sum) torch computed.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/multihead_attention.h"
#include "nn/transformer.h"
#include "tensor/factory.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using nlohmann::json;
using testing::set_values;
using testing::values_of;

const json& fixture() {
  static const json doc = [] {
    const auto path = std::filesystem::path(__FILE__).parent_path() / "../../fixtures/transformer_reference.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    return json::parse(in);
  }();
  return doc;
}

Tensor tensor_of(const json& entry, DType dtype = DType::Float64) {
  const auto shape = entry.at("shape").get<std::vector<int64_t>>();
  return from_vector(entry.at("values").get<std::vector<double>>(), Shape(shape.begin(), shape.end())).to(dtype);
}

Tensor input_of(const json& entry) {
  Tensor t = tensor_of(entry);
  autograd::set_requires_grad(t);
  return t;
}

// Every parameter of `module` gets torch's values; the names must match both ways.
void load_params(Module& module, const json& params) {
  const auto named = module.named_parameters();
  CHECK(named.size() == params.size());
  for (const auto& [name, p] : named) {
    INFO(name);
    REQUIRE(params.contains(name));
    const Tensor want = tensor_of(params.at(name));
    REQUIRE(p.shape() == want.shape());
    set_values(p, values_of(want));
  }
}

void check_close(const Tensor& got, const json& want, double tol = 1e-10) {
  const Tensor w = tensor_of(want);
  REQUIRE(got.shape() == w.shape());
  const std::vector<double> a = values_of(got.contiguous());
  const std::vector<double> b = values_of(w);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(b[i]).margin(tol).epsilon(tol));
  }
}

TEST_CASE("MultiheadAttention matches torch 1.13 with a float attn_mask and a key_padding_mask") {
  const json& c = fixture().at("multihead_attention");
  MultiheadAttention mha(4, 2, 0.0);
  mha.to(DType::Float64);
  load_params(mha, c.at("params"));
  const Tensor q = input_of(c.at("query"));
  const Tensor k = input_of(c.at("key"));
  const Tensor v = input_of(c.at("value"));
  const Tensor padding = tensor_of(c.at("key_padding_mask"), DType::Bool);
  const TensorList out = mha(TensorList{q, k, v, tensor_of(c.at("attn_mask")), padding});
  check_close(out[0], c.at("output"));
  check_close(out[1], c.at("weights"));
  autograd::backward(autograd::sum(out[0]));
  check_close(autograd::grad(q), c.at("query_grad"));
  check_close(autograd::grad(k), c.at("key_grad"));
  check_close(autograd::grad(v), c.at("value_grad"));
}

TEST_CASE("Transformer matches torch 1.13 with a causal tgt_mask") {
  const json& c = fixture().at("transformer");
  TransformerOptions o;
  o.d_model = 4;
  o.nhead = 2;
  o.num_encoder_layers = 2;
  o.num_decoder_layers = 1;
  o.dim_feedforward = 6;
  o.dropout = 0.0;
  Transformer model(o);
  model.to(DType::Float64);
  load_params(model, c.at("params"));
  const Tensor src = input_of(c.at("src"));
  const Tensor tgt = input_of(c.at("tgt"));
  const Tensor out = model(TensorList{src, tgt, Tensor(), generate_square_subsequent_mask(3, DType::Float64)})[0];
  check_close(out, c.at("output"));
  autograd::backward(autograd::sum(out));
  check_close(autograd::grad(src), c.at("src_grad"));
  check_close(autograd::grad(tgt), c.at("tgt_grad"));
}

}  // namespace
}  // namespace braid::nn
