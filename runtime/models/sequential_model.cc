// The "sequential" model: the job file's `model.layers`, in order, as an nn::Sequential (children "0",
// "1", ... as torch.nn.Sequential names them).
//
//   layers: [{kind: linear, in: 64, out: 32}, relu, {kind: dropout, p: 0.1}, {kind: linear, in: 32, out: 10}]
//
// A layer is a mapping with `kind`, or just the kind's name when it takes no keys. Parsing is separate
// from building so that validate_model reports every mistake ("model.layers[2].out: ...") without
// creating a module. Feature widths are followed through the stack where they are known (linear,
// embedding, layer_norm set or check them; activations keep them; flatten forgets them), so a linear
// whose `in` does not match the previous layer's output is caught before training starts.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops/shape.h"
#include "base/check.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "runtime/models/builtin_models.h"
#include "tensor/random.h"

namespace braid::runtime::detail {

namespace {

using nlohmann::json;

// torch.nn.Flatten: flattens dims start_dim..end_dim (by default every dim but the batch).
class Flatten : public nn::Module {
 public:
  Flatten(int64_t start_dim, int64_t end_dim) : nn::Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& input) override { return autograd::flatten(input, start_dim_, end_dim_); }

 protected:
  std::string extra_repr() const override { return fmt::format("start_dim={}, end_dim={}", start_dim_, end_dim_); }

 private:
  int64_t start_dim_;
  int64_t end_dim_;
};

enum class LayerKind { Linear, ReLU, Tanh, GELU, Sigmoid, Dropout, LayerNorm, Embedding, Flatten };

struct LayerType {
  const char* name;
  LayerKind kind;
  std::vector<std::string> keys;  // besides "kind"
};

const std::vector<LayerType>& layer_types() {
  static const std::vector<LayerType> types = {
      {"linear", LayerKind::Linear, {"in", "out", "bias"}},
      {"relu", LayerKind::ReLU, {}},
      {"tanh", LayerKind::Tanh, {}},
      {"gelu", LayerKind::GELU, {"approximate"}},
      {"sigmoid", LayerKind::Sigmoid, {}},
      {"dropout", LayerKind::Dropout, {"p"}},
      {"layer_norm", LayerKind::LayerNorm, {"dim", "eps"}},
      {"embedding", LayerKind::Embedding, {"num", "dim"}},
      {"flatten", LayerKind::Flatten, {"start_dim", "end_dim"}},
  };
  return types;
}

// One parsed layer: what make_layer needs.
struct LayerSpec {
  LayerKind kind = LayerKind::ReLU;
  int64_t a = 0;  // linear in, layer_norm dim, embedding num, flatten start_dim
  int64_t b = 0;  // linear out, embedding dim, flatten end_dim
  bool bias = true;
  double x = 0;  // dropout p, layer_norm eps
  std::string approximate;
};

int64_t positive(const KeyReader& r, const std::string& key) {
  const int64_t v = r.get_int(key);
  BRAID_CHECK_ARG(v > 0, "{}: must be positive, got {}", r.where(key), v);
  return v;
}

void check_width(const std::optional<int64_t>& width, int64_t expected, const std::string& where) {
  if (width.has_value() && *width != expected) {
    BRAID_THROW(InvalidArgument, "{}: {} does not match the previous layer's output width {}", where, expected,
                width.value());
  }
}

// Parses layers[index]; `width` is the feature width coming in (nullopt when unknown) and is updated to
// the width going out.
LayerSpec parse_layer(const json& layer, size_t index, std::optional<int64_t>& width) {
  const std::string where = fmt::format("model.layers[{}]", index);
  std::vector<std::string> names;
  for (const LayerType& t : layer_types()) names.emplace_back(t.name);
  std::string kind_name;
  if (layer.is_string()) {
    kind_name = layer.get<std::string>();
  } else {
    BRAID_CHECK_ARG(layer.is_object(), "{}: expected a mapping with a kind (or a kind's name), got {}", where,
                    layer.dump());
    const auto it = layer.find("kind");
    BRAID_CHECK_ARG(it != layer.end(), "{}.kind: missing (one of {})", where, fmt::join(names, ", "));
    BRAID_CHECK_ARG(it->is_string(), "{}.kind: expected a string, got {}", where, it->dump());
    kind_name = it->get<std::string>();
  }
  const LayerType* type = nullptr;
  for (const LayerType& t : layer_types()) {
    if (kind_name == t.name) type = &t;
  }
  if (type == nullptr) {
    BRAID_THROW(InvalidArgument, "{}.kind: unknown layer '{}'{}; known: {}", where, kind_name,
                did_you_mean(kind_name, names), fmt::join(names, ", "));
  }
  static const json kNoKeys = json::object();
  const json& keys = layer.is_object() ? layer : kNoKeys;
  std::vector<std::string> allowed = type->keys;
  allowed.emplace_back("kind");
  check_known_keys(keys, allowed, where, fmt::format("key of layer {}", type->name));
  const KeyReader r(keys, where);

  LayerSpec s;
  s.kind = type->kind;
  switch (type->kind) {
    case LayerKind::Linear:
      s.a = positive(r, "in");
      s.b = positive(r, "out");
      s.bias = r.get_bool("bias", true);
      check_width(width, s.a, r.where("in"));
      width = s.b;
      break;
    case LayerKind::ReLU:
    case LayerKind::Tanh:
    case LayerKind::Sigmoid:
      break;
    case LayerKind::GELU:
      s.approximate = r.get_string("approximate", "none");
      BRAID_CHECK_ARG(s.approximate == "none" || s.approximate == "tanh", "{}: expected none or tanh, got \"{}\"",
                      r.where("approximate"), s.approximate);
      break;
    case LayerKind::Dropout:
      s.x = r.get_double("p", 0.5);
      BRAID_CHECK_ARG(s.x >= 0.0 && s.x < 1.0, "{}: must be in [0, 1), got {}", r.where("p"), s.x);
      break;
    case LayerKind::LayerNorm:
      s.a = positive(r, "dim");
      s.x = r.get_double("eps", 1e-5);
      BRAID_CHECK_ARG(s.x > 0.0, "{}: must be positive, got {}", r.where("eps"), s.x);
      check_width(width, s.a, r.where("dim"));
      width = s.a;
      break;
    case LayerKind::Embedding:
      s.a = positive(r, "num");
      s.b = positive(r, "dim");
      width = s.b;
      break;
    case LayerKind::Flatten:
      s.a = r.get_int("start_dim", 1);
      s.b = r.get_int("end_dim", -1);
      width.reset();
      break;
  }
  return s;
}

std::vector<LayerSpec> parse_layers(const json& layers) {
  BRAID_CHECK_ARG(layers.is_array(), "model.layers: expected a list of layers, got {}", layers.dump());
  BRAID_CHECK_ARG(!layers.empty(), "model.layers: the sequential model needs at least one layer");
  std::vector<LayerSpec> specs;
  std::optional<int64_t> width;
  for (size_t i = 0; i < layers.size(); ++i) specs.push_back(parse_layer(layers[i], i, width));
  return specs;
}

std::shared_ptr<nn::Module> make_layer(const LayerSpec& s, Generator& gen) {
  switch (s.kind) {
    case LayerKind::Linear: return std::make_shared<nn::Linear>(s.a, s.b, s.bias, &gen);
    case LayerKind::ReLU: return std::make_shared<nn::ReLU>();
    case LayerKind::Tanh: return std::make_shared<nn::Tanh>();
    case LayerKind::GELU: return std::make_shared<nn::GELU>(s.approximate);
    case LayerKind::Sigmoid: return std::make_shared<nn::Sigmoid>();
    // Masks come from the default generator, which braid run seeds from (train.seed, rank).
    case LayerKind::Dropout: return std::make_shared<nn::Dropout>(s.x);
    case LayerKind::LayerNorm: return std::make_shared<nn::LayerNorm>(s.a, s.x);
    case LayerKind::Embedding: return std::make_shared<nn::Embedding>(s.a, s.b, &gen);
    case LayerKind::Flatten: return std::make_shared<Flatten>(s.a, s.b);
  }
  BRAID_THROW(InternalError, "sequential: unhandled layer kind {}", static_cast<int>(s.kind));
}

}  // namespace

BuiltinModel sequential_model() {
  ModelDefinition d;
  d.name = "sequential";
  d.help = "the layers listed in model.layers: linear {in, out, bias}, relu, tanh, gelu {approximate}, sigmoid, "
           "dropout {p}, layer_norm {dim, eps}, embedding {num, dim}, flatten {start_dim, end_dim}";
  d.build = [](const ModelBuild& b) -> std::shared_ptr<nn::Module> {
    const std::vector<LayerSpec> specs = parse_layers(b.layers);
    // Layers draw in order from one generator, as constructing the same torch.nn.Sequential would.
    Generator gen(b.init_seed);
    auto net = std::make_shared<nn::Sequential>();
    for (const LayerSpec& s : specs) net->push_back(make_layer(s, gen));
    return net;
  };
  return {std::move(d), [](const ModelBuild& b) { parse_layers(b.layers); }};
}

}  // namespace braid::runtime::detail
