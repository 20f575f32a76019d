// braid's optimizers replay PyTorch 1.13's: tests/fixtures/optim_reference.json (written by
// tests/fixtures/make_optim_fixtures.py with torch) holds initial float32 parameters, per-step gradients
// and the parameters and state torch computed; braid must land on the same numbers to float rounding
// (torch's vectorised kernels fuse some multiply-adds, so bit equality is not expected).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>

#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "optim_test_util.h"
#include "tensor/sparse.h"

using namespace braid;
using namespace braid::nn::optim;
using braid::nn::TensorList;
using namespace braid::nn::optim::testing;
using nlohmann::json;

namespace {

const json& fixture() {
  static const json doc = [] {
    const auto path = std::filesystem::path(__FILE__).parent_path() / "../../fixtures/optim_reference.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    return json::parse(in);
  }();
  return doc;
}

template <class T>
T option(const json& options, const char* key, T fallback) {
  return options.contains(key) ? options.at(key).get<T>() : fallback;
}

std::unique_ptr<Optimizer> make(const std::string& kind, const json& o, const TensorList& params) {
  if (kind == "SGD") {
    return std::make_unique<SGD>(params, SGDOptions{.lr = o.at("lr").get<double>(),
                                                    .momentum = option(o, "momentum", 0.0),
                                                    .dampening = option(o, "dampening", 0.0),
                                                    .weight_decay = option(o, "weight_decay", 0.0),
                                                    .nesterov = option(o, "nesterov", false),
                                                    .maximize = option(o, "maximize", false)});
  }
  if (kind == "Adam") {
    return std::make_unique<Adam>(params, AdamOptions{.lr = option(o, "lr", 1e-3),
                                                      .beta1 = option(o, "beta1", 0.9),
                                                      .beta2 = option(o, "beta2", 0.999),
                                                      .eps = option(o, "eps", 1e-8),
                                                      .weight_decay = option(o, "weight_decay", 0.0),
                                                      .amsgrad = option(o, "amsgrad", false),
                                                      .maximize = option(o, "maximize", false)});
  }
  REQUIRE(kind == "AdamW");
  return std::make_unique<AdamW>(params, AdamWOptions{.lr = option(o, "lr", 1e-3),
                                                      .beta1 = option(o, "beta1", 0.9),
                                                      .beta2 = option(o, "beta2", 0.999),
                                                      .eps = option(o, "eps", 1e-8),
                                                      .weight_decay = option(o, "weight_decay", 1e-2),
                                                      .amsgrad = option(o, "amsgrad", false),
                                                      .maximize = option(o, "maximize", false)});
}

Tensor float_tensor(const json& vals, const Shape& shape) {
  return from_vector<float>(vals.get<std::vector<float>>(), shape);
}

// float32 rounding: torch and braid may differ by an ulp or so per operation.
constexpr double kTol = 2e-6;

}  // namespace

TEST_CASE("torch reference: the fixture is there and was made by torch", "[optim][torch]") {
  const json& doc = fixture();
  INFO("regenerate with tests/fixtures/make_optim_fixtures.py");
  REQUIRE(doc.at("torch_version").get<std::string>().rfind("1.13", 0) == 0);
  REQUIRE(doc.at("cases").size() >= 10);
}

TEST_CASE("torch reference: braid's optimizers reproduce PyTorch 1.13 step by step", "[optim][torch]") {
  for (const json& c : fixture().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    DYNAMIC_SECTION(name) {
      TensorList params;
      for (const json& p : c.at("params")) {
        Tensor t = float_tensor(p.at("values"), p.at("shape").get<Shape>());
        autograd::set_requires_grad(t);
        params.push_back(t);
      }
      auto opt = make(c.at("optimizer").get<std::string>(), c.at("options"), params);
      const json& grads = c.at("grads");
      for (size_t step = 0; step < grads.size(); ++step) {
        for (size_t i = 0; i < params.size(); ++i) {
          const json& g = grads[step][i];
          if (g.is_null()) {
            autograd::set_grad(params[i], Tensor());
          } else if (g.is_object()) {
            const auto rows = g.at("indices").get<std::vector<int64_t>>();
            const auto nnz = static_cast<int64_t>(rows.size());
            Shape value_shape = params[i].shape();
            value_shape[0] = nnz;
            autograd::set_grad(params[i], SparseTensor(from_vector<int64_t>(rows, {1, nnz}),
                                                       float_tensor(g.at("values"), value_shape), params[i].shape())
                                              .to_tensor());
          } else {
            autograd::set_grad(params[i], float_tensor(g, params[i].shape()));
          }
        }
        opt->step();
        for (size_t i = 0; i < params.size(); ++i) {
          INFO("step " << step + 1 << ", parameter " << i);
          require_close(params[i], c.at("expected")[step][i].get<std::vector<double>>(), kTol);
        }
      }
      for (const auto& [index, entries] : c.at("state").items()) {
        const ParamState& st = opt->state(std::stoul(index));
        for (const auto& [key, want] : entries.items()) {
          INFO("state " << key << " of parameter " << index);
          REQUIRE(st.count(key) == 1);
          if (key == "step") {
            CHECK(st.at(key).item<double>() == want.get<double>());
          } else {
            require_close(st.at(key), want.get<std::vector<double>>(), kTol);
          }
        }
        CHECK(st.size() == entries.size());
      }
    }
  }
}
