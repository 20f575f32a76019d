// The model registry (runtime/models/model_registry.h): every built-in builds and runs with the right
// output shape; init_seed fixes the parameters; argument, layer and validate_model errors name the dotted
// key; user models register (examples/custom_model) and duplicates are refused.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "nn/module.h"
#include "runtime/models/fsdp_models.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"
#include "tensor/compare.h"
#include "tensor/factory.h"

namespace braid::runtime {

namespace {

using nlohmann::json;
using Catch::Matchers::Contains;

std::shared_ptr<nn::Module> build(const std::string& kind, const json& args, uint64_t seed = 0,
                                  const json& layers = json::array()) {
  const ModelBuild b{args, layers, seed, {}, nullptr};
  return get_model(kind).build(b);
}

ModelSpec spec(const std::string& kind, json args = json::object(), json layers = json::array()) {
  ModelSpec s;
  s.kind = kind;
  s.args = std::move(args);
  s.layers = std::move(layers);
  return s;
}

// Whether two modules hold bit-identical parameters under the same names.
bool same_parameters(const nn::Module& a, const nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].first != pb[i].first || !equal(pa[i].second, pb[i].second)) return false;
  }
  return true;
}

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("models: the built-ins are registered on first use, sorted", "[models]") {
  const std::vector<std::string> names = model_names();
  for (const char* kind : {"embedding_bag", "fsdp_nested", "hybrid", "linear", "mlp", "sequential", "transformer"}) {
    CHECK(find_model(kind) != nullptr);
    CHECK(std::find(names.begin(), names.end(), kind) != names.end());
  }
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(find_model("nope") == nullptr);
  CHECK_THROWS_WITH(get_model("mpl"), Contains("model.kind: unknown model 'mpl' (did you mean 'mlp'?)") &&
                                          Contains("registered: ") && Contains("sequential"));
  CHECK_THROWS_AS(get_model("mpl"), InvalidArgument);
}

TEST_CASE("models: each local built-in builds and forwards with the right output shape", "[models]") {
  auto linear = build("linear", {{"in", 3}, {"out", 5}});
  CHECK((*linear)(zeros({4, 3})).shape() == Shape{4, 5});
  CHECK(names_of(*linear) == std::vector<std::string>{"weight", "bias"});
  CHECK(names_of(*build("linear", {{"in", 3}, {"out", 5}, {"bias", false}})) == std::vector<std::string>{"weight"});

  auto bag = build("embedding_bag", {{"num_embeddings", 10}, {"embedding_dim", 4}, {"mode", "sum"}});
  CHECK((*bag)(from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3})).shape() == Shape{2, 4});

  auto mlp = build("mlp", {{"in", 6}, {"hidden", {8, 7}}, {"out", 2}});
  CHECK((*mlp)(zeros({5, 6})).shape() == Shape{5, 2});
  // Linear, ReLU, Linear, ReLU, Linear as torch.nn.Sequential names them.
  CHECK(names_of(*mlp) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"});
  auto mlp_dropout = build("mlp", {{"in", 6}, {"hidden", {8}}, {"out", 2}, {"dropout", 0.25}});
  CHECK(names_of(*mlp_dropout) == std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"});
  CHECK((*build("mlp", {{"in", 6}, {"out", 2}}))(zeros({1, 6})).shape() == Shape{1, 2});

  const json layers = json::array({json{{"kind", "embedding"}, {"num", 20}, {"dim", 4}},
                                   json{{"kind", "flatten"}},
                                   json{{"kind", "linear"}, {"in", 12}, {"out", 8}},
                                   "gelu",
                                   json{{"kind", "layer_norm"}, {"dim", 8}},
                                   json{{"kind", "dropout"}, {"p", 0.1}},
                                   "tanh",
                                   json{{"kind", "linear"}, {"in", 8}, {"out", 3}, {"bias", false}},
                                   "sigmoid",
                                   "relu"});
  auto seq = build("sequential", json::object(), 0, layers);
  seq->eval();
  const Tensor tokens = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor y = (*seq)(tokens);
  CHECK(y.shape() == Shape{2, 3});
  CHECK(names_of(*seq) == std::vector<std::string>{"0.weight", "2.weight", "2.bias", "4.weight", "4.bias", "7.weight"});

  auto nested = build("fsdp_nested", json::object());
  CHECK((*nested)(zeros({3, 8})).shape() == Shape{3, 8});
  auto transformer = build("transformer", json::object());
  const Tensor src = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor tgt = from_vector(std::vector<int64_t>{7, 8, 9, 10}, {2, 2});
  CHECK((*transformer)(nn::TensorList{src, tgt})[0].shape() == Shape{2, 2, TransformerWithSharedParams::kVocab});
  CHECK(names_of(*transformer).front() == "embed_tokens.weight");
}

TEST_CASE("models: the same init_seed gives identical parameters, another seed different ones", "[models]") {
  const json mlp_args = {{"in", 6}, {"hidden", {8}}, {"out", 2}};
  const json layers = json::array({json{{"kind", "linear"}, {"in", 4}, {"out", 4}}, "relu",
                                   json{{"kind", "embedding"}, {"num", 5}, {"dim", 2}}});
  struct Case {
    std::string kind;
    json args;
    json layers;
  };
  const std::vector<Case> cases = {
      {"linear", {{"in", 3}, {"out", 5}}, json::array()},
      {"embedding_bag", {{"num_embeddings", 10}, {"embedding_dim", 4}}, json::array()},
      {"mlp", mlp_args, json::array()},
      {"sequential", json::object(), layers},
      {"fsdp_nested", json::object(), json::array()},
      {"transformer", json::object(), json::array()},
  };
  for (const Case& c : cases) {
    INFO("model " << c.kind);
    const auto a = build(c.kind, c.args, 7, c.layers);
    const auto b = build(c.kind, c.args, 7, c.layers);
    const auto other = build(c.kind, c.args, 8, c.layers);
    CHECK(same_parameters(*a, *b));
    CHECK_FALSE(same_parameters(*a, *other));
  }
}

TEST_CASE("models: builds on several threads at once draw from their own generators", "[models]") {
  // The runtime builds on RPC threads while other threads may draw from the default generator: a build
  // must depend on init_seed alone.
  const json args = {{"in", 16}, {"hidden", {32, 32}}, {"out", 4}};
  const auto reference = build("mlp", args, 3);
  std::vector<std::shared_ptr<nn::Module>> built(4);
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < built.size(); ++i) {
      threads.emplace_back([&, i] {
        for (int k = 0; k < 20; ++k) built[i] = build("mlp", args, 3);
        (void)randn({64});  // the default generator moves meanwhile
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (const auto& m : built) CHECK(same_parameters(*reference, *m));
}

TEST_CASE("models: ModelBuild's accessors read typed arguments with defaults and name the key", "[models]") {
  const json args = {{"n", 4},          {"f", 2.0},  {"x", 0.5}, {"flag", true}, {"s", "abc"},
                     {"list", {1, 2}}, {"bad", {1, "two"}}};
  const ModelBuild b{args, json::array(), 0, {}, nullptr};
  CHECK(b.arg_int("n") == 4);
  CHECK(b.arg_int("f") == 2);  // YAML may write an integer as 2.0
  CHECK(b.arg_int("missing", 9) == 9);
  CHECK(b.arg_double("x") == 0.5);
  CHECK(b.arg_double("n") == 4.0);
  CHECK(b.arg_bool("flag"));
  CHECK(b.arg_string("s") == "abc");
  CHECK(b.arg_ints("list") == std::vector<int64_t>{1, 2});
  CHECK_THROWS_WITH(b.arg_int("s"), "model.args.s: expected an integer, got \"abc\"");
  CHECK_THROWS_WITH(b.arg_int("x"), "model.args.x: expected an integer, got 0.5");
  CHECK_THROWS_WITH(b.arg_bool("n"), "model.args.n: expected true or false, got 4");
  CHECK_THROWS_WITH(b.arg_string("n"), "model.args.n: expected a string, got 4");
  CHECK_THROWS_WITH(b.arg_double("s"), "model.args.s: expected a number, got \"abc\"");
  CHECK_THROWS_WITH(b.arg_ints("bad"), "model.args.bad[1]: expected an integer, got \"two\"");
  CHECK_THROWS_WITH(b.arg_int("width"), "model.args.width: missing (this argument has no default)");
  CHECK_THROWS_AS(b.arg_int("width"), InvalidArgument);
  // Absent args (null) read as empty.
  const json null_args;
  const ModelBuild empty{null_args, json::array(), 0, {}, nullptr};
  CHECK(empty.arg_int("n", 3) == 3);
  // Built-ins check ranges too.
  CHECK_THROWS_WITH(build("linear", {{"in", 0}, {"out", 2}}), "model.args.in: must be positive, got 0");
  CHECK_THROWS_WITH(build("mlp", {{"in", 2}, {"hidden", {4, -1}}, {"out", 2}}),
                    "model.args.hidden[1]: must be positive, got -1");
  CHECK_THROWS_WITH(build("embedding_bag", {{"num_embeddings", 2}, {"embedding_dim", 2}, {"mode", "avg"}}),
                    "model.args.mode: expected sum, mean or max, got \"avg\"");
}

TEST_CASE("models: sequential layer errors name the layer and key", "[models]") {
  auto check_layers = [](const json& layers) { validate_model(spec("sequential", json::object(), layers), DdpMode::None, false); };
  const json lin = {{"kind", "linear"}, {"in", 4}, {"out", 4}};
  CHECK_NOTHROW(check_layers(json::array({lin, "relu"})));
  CHECK_THROWS_WITH(check_layers(json::array({lin, "relu", json{{"kind", "linear"}, {"in", 4}, {"out", "abc"}}})),
                    "model.layers[2].out: expected an integer, got \"abc\"");
  CHECK_THROWS_WITH(check_layers(json::array({lin, json{{"kind", "reluu"}}})),
                    Contains("model.layers[1].kind: unknown layer 'reluu' (did you mean 'relu'?)"));
  CHECK_THROWS_WITH(check_layers(json::array({json{{"kind", "linear"}, {"in", 4}, {"out", 4}, {"bais", true}}})),
                    Contains("model.layers[0].bais: unknown key of layer linear (did you mean 'bias'?)"));
  CHECK_THROWS_WITH(check_layers(json::array({json{{"kind", "linear"}, {"in", 4}}})),
                    "model.layers[0].out: missing (this argument has no default)");
  CHECK_THROWS_WITH(check_layers(json::array({json{{"out", 4}}})), Contains("model.layers[0].kind: missing"));
  CHECK_THROWS_WITH(check_layers(json::array({42})), Contains("model.layers[0]: expected a mapping"));
  CHECK_THROWS_WITH(check_layers(json::array({lin, json{{"kind", "linear"}, {"in", 5}, {"out", 2}}})),
                    "model.layers[1].in: 5 does not match the previous layer's output width 4");
  CHECK_THROWS_WITH(check_layers(json::array({lin, json{{"kind", "layer_norm"}, {"dim", 3}}})),
                    "model.layers[1].dim: 3 does not match the previous layer's output width 4");
  CHECK_THROWS_WITH(check_layers(json::array({json{{"kind", "dropout"}, {"p", 1.5}}})),
                    "model.layers[0].p: must be in [0, 1), got 1.5");
  CHECK_THROWS_WITH(check_layers(json::array()), Contains("model.layers: the sequential model needs at least one layer"));
  CHECK_THROWS_WITH(check_layers(json{{"kind", "relu"}}), Contains("model.layers: expected a list of layers"));
  // After flatten the width is unknown, so any `in` is accepted there.
  CHECK_NOTHROW(check_layers(json::array({lin, "flatten", json{{"kind", "linear"}, {"in", 9}, {"out", 1}}})));
}

TEST_CASE("models: validate_model checks kind, argument names, layers, inside DDP and workers", "[models]") {
  CHECK_NOTHROW(validate_model(spec("mlp", {{"in", 2}, {"out", 1}}), DdpMode::Outside, false));
  CHECK_THROWS_WITH(validate_model(spec("lineer"), DdpMode::None, false),
                    Contains("model.kind: unknown model 'lineer' (did you mean 'linear'?)"));
  CHECK_THROWS_WITH(validate_model(spec("mlp", {{"in", 2}, {"out", 1}, {"hiden", {3}}}), DdpMode::None, false),
                    "model.args.hiden: unknown argument of model 'mlp' (did you mean 'hidden'?); accepted: in, "
                    "hidden, out, dropout, bias");
  CHECK_THROWS_WITH(validate_model(spec("linear", {{"in", "two"}, {"out", 1}}), DdpMode::None, false),
                    "model.args.in: expected an integer, got \"two\"");
  CHECK_THROWS_WITH(validate_model(spec("linear", {{"in", 2}}), DdpMode::None, false),
                    "model.args.out: missing (this argument has no default)");
  CHECK_THROWS_WITH(validate_model(spec("linear", {{"in", 2}, {"out", 1}}, json::array({"relu"})), DdpMode::None, false),
                    Contains("model.layers: only model kind 'sequential' takes layers"));
  CHECK_THROWS_WITH(validate_model(spec("linear", json::array({1})), DdpMode::None, false),
                    Contains("model.args: expected a mapping"));
  CHECK_THROWS_WITH(validate_model(spec("mlp", {{"in", 2}, {"out", 1}}), DdpMode::Inside, false),
                    Contains("ddp.mode: 'inside' is not supported by model 'mlp'"));
  // hybrid: inside DDP is fine, but its remote parts need a worker.
  CHECK_NOTHROW(validate_model(spec("hybrid"), DdpMode::Inside, true));
  CHECK_THROWS_WITH(validate_model(spec("hybrid"), DdpMode::None, false),
                    "roles.workers: model 'hybrid' places parts on workers (em, net), but the job has no workers");
  CHECK_THROWS_WITH(validate_model(spec("hybrid", {{"d_hid", 0}}), DdpMode::None, true),
                    "model.args.d_hid: must be positive, got 0");
  CHECK_THROWS_WITH(validate_model(spec("fsdp_nested", {{"width", 3}}), DdpMode::None, false),
                    "model.args.width: unknown argument of model 'fsdp_nested'; accepted: none");
}

TEST_CASE("models: a user model registers, validates and builds; names are unique", "[models]") {
  // examples/custom_model/my_net.cc, the plugin built in this tree.
  const LoadedPlugin plugin = load_plugin(BRAID_MY_NET_PLUGIN);
  CHECK(plugin.models == std::vector<std::string>{"my_net"});
  REQUIRE(find_model("my_net") != nullptr);
  CHECK(model_origin("my_net") == plugin.path);
  CHECK_NOTHROW(validate_model(spec("my_net", {{"in", 3}, {"out", 2}}), DdpMode::Outside, false));
  CHECK_THROWS_WITH(validate_model(spec("my_net", {{"in", 3}, {"out", 2}, {"widht", 4}}), DdpMode::None, false),
                    Contains("model.args.widht: unknown argument of model 'my_net' (did you mean 'width'?)"));
  const auto a = build("my_net", {{"in", 3}, {"width", 5}, {"out", 2}}, 11);
  const auto b = build("my_net", {{"in", 3}, {"width", 5}, {"out", 2}}, 11);
  CHECK((*a)(ones({4, 3})).shape() == Shape{4, 2});
  CHECK(same_parameters(*a, *b));
  CHECK(names_of(*a) == std::vector<std::string>{"scale", "hidden.weight", "hidden.bias", "head.weight", "head.bias"});
  CHECK_THROWS_WITH(build("my_net", {{"in", "x"}, {"out", 2}}), "model.args.in: expected an integer, got \"x\"");

  CHECK_THROWS_WITH(register_model(get_model("my_net")),
                    "register_model: a model named 'my_net' is already registered (by plugin " + plugin.path + ")");
  auto definition = [](const std::string& name, bool with_build) {
    ModelDefinition d;
    d.name = name;
    if (with_build) d.build = [](const ModelBuild&) { return std::shared_ptr<nn::Module>(); };
    return d;
  };
  CHECK_THROWS_WITH(register_model(definition("linear", true)),
                    "register_model: a model named 'linear' is already registered (built in)");
  CHECK_THROWS_WITH(register_model(definition("", true)), "register_model: the model name is empty");
  CHECK_THROWS_WITH(register_model(definition("no_build", false)),
                    "register_model: model 'no_build' has no build function");
  CHECK(find_model("no_build") == nullptr);
}

}  // namespace braid::runtime
