#include "dist_autograd/module_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "nn/embedding.h"
#include "nn/linear.h"

namespace braid::dist_autograd {

using rpc::Args;
using rpc::Value;

// --- ArgReader

ArgReader::ArgReader(std::string cls, const Args& args, std::vector<std::string> names)
    : cls_(std::move(cls)), args_(args), names_(std::move(names)) {
  BRAID_CHECK_ARG(args_.positional.size() <= names_.size(), "{}: takes at most {} arguments ({} given)", cls_,
                  names_.size(), args_.positional.size());
  for (const auto& [key, value] : args_.kwargs.items) {
    const auto it = std::find(names_.begin(), names_.end(), key);
    BRAID_CHECK_ARG(it != names_.end(), "{}: got an unexpected keyword argument '{}' (arguments: {})", cls_, key,
                    fmt::join(names_, ", "));
    const auto index = static_cast<size_t>(it - names_.begin());
    BRAID_CHECK_ARG(index >= args_.positional.size(), "{}: argument '{}' appears both positionally and by keyword",
                    cls_, key);
  }
}

const Value* ArgReader::find(const std::string& name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  BRAID_ASSERT(it != names_.end(), "{}: '{}' is not one of the declared arguments", cls_, name);
  const auto index = static_cast<size_t>(it - names_.begin());
  if (index < args_.positional.size()) return &args_.positional[index];
  return args_.kwargs.find(name);
}

const Value& ArgReader::at(const std::string& name) const {
  const Value* v = find(name);
  BRAID_CHECK_ARG(v != nullptr, "{}: missing argument '{}'", cls_, name);
  return *v;
}

namespace {

// Re-throws a Value type error with the class and argument in front.
template <class F>
auto typed(const std::string& cls, const std::string& name, F&& read) {
  try {
    return read();
  } catch (const InvalidArgument& e) {
    BRAID_THROW(InvalidArgument, "{}: argument '{}': {}", cls, name, e.what());
  }
}

}  // namespace

int64_t ArgReader::get_int(const std::string& name) const {
  return typed(cls_, name, [&] { return at(name).as_int(); });
}

int64_t ArgReader::get_int(const std::string& name, int64_t fallback) const {
  const Value* v = find(name);
  return v == nullptr ? fallback : typed(cls_, name, [&] { return v->as_int(); });
}

bool ArgReader::get_bool(const std::string& name, bool fallback) const {
  const Value* v = find(name);
  return v == nullptr ? fallback : typed(cls_, name, [&] { return v->as_bool(); });
}

double ArgReader::get_double(const std::string& name, double fallback) const {
  const Value* v = find(name);
  return v == nullptr ? fallback : typed(cls_, name, [&] { return v->as_double(); });
}

std::string ArgReader::get_string(const std::string& name, const std::string& fallback) const {
  const Value* v = find(name);
  return v == nullptr ? fallback : typed(cls_, name, [&] { return v->as_string(); });
}

void ArgReader::require_none(const std::string& name) const {
  const Value* v = find(name);
  BRAID_CHECK_ARG(v == nullptr || v->is_none(), "{}: argument '{}' is only supported at its default (None), got {}",
                  cls_, name, v == nullptr ? "" : v->describe());
}

// --- the built-in classes

namespace {

// PyTorch's defaults that braid does not implement otherwise: they must stay at the default.
void require_default_norm(const ArgReader& r) {
  r.require_none("max_norm");
  const double norm_type = r.get_double("norm_type", 2.0);
  BRAID_CHECK_ARG(norm_type == 2.0, "argument 'norm_type' is only supported at its default (2.0), got {}", norm_type);
  BRAID_CHECK_ARG(!r.get_bool("scale_grad_by_freq", false),
                  "argument 'scale_grad_by_freq' is only supported at its default (False)");
}

// `_weight`: PyTorch's way of giving the initial table; copied into the freshly drawn weight.
void load_weight(const ArgReader& r, const std::string& cls, const Tensor& weight) {
  const Value* w = r.find("_weight");
  if (w == nullptr || w->is_none()) return;
  const Tensor& given = typed(cls, "_weight", [&]() -> const Tensor& { return w->as_tensor(); });
  BRAID_CHECK_ARG(given.shape() == weight.shape(), "{}: argument '_weight' has shape {}, the table is {}", cls,
                  shape_str(given.shape()), shape_str(weight.shape()));
  autograd::NoGradGuard no_grad;
  weight.copy_(given);
}

std::shared_ptr<nn::Module> make_linear(const Args& args) {
  const ArgReader r("nn.Linear", args, {"in_features", "out_features", "bias"});
  return std::make_shared<nn::Linear>(r.get_int("in_features"), r.get_int("out_features"), r.get_bool("bias", true));
}

std::shared_ptr<nn::Module> make_embedding(const Args& args) {
  const std::string cls = "nn.Embedding";
  const ArgReader r(cls, args,
                    {"num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq",
                     "sparse", "_weight"});
  r.require_none("padding_idx");
  try {
    require_default_norm(r);
    BRAID_CHECK_ARG(!r.get_bool("sparse", false), "argument 'sparse' is not supported by braid's Embedding "
                    "(nn.EmbeddingBag has sparse gradients)");
  } catch (const InvalidArgument& e) {
    BRAID_THROW(InvalidArgument, "{}: {}", cls, e.what());
  }
  auto m = std::make_shared<nn::Embedding>(r.get_int("num_embeddings"), r.get_int("embedding_dim"));
  load_weight(r, cls, m->weight());
  return m;
}

nn::EmbeddingBagMode parse_mode(const std::string& mode) {
  if (mode == "sum") return nn::EmbeddingBagMode::Sum;
  if (mode == "mean") return nn::EmbeddingBagMode::Mean;
  if (mode == "max") return nn::EmbeddingBagMode::Max;
  BRAID_THROW(InvalidArgument, "nn.EmbeddingBag: mode has to be one of sum, mean or max, got '{}'", mode);
}

std::shared_ptr<nn::Module> make_embedding_bag(const Args& args) {
  const std::string cls = "nn.EmbeddingBag";
  const ArgReader r(cls, args,
                    {"num_embeddings", "embedding_dim", "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse",
                     "_weight", "include_last_offset", "padding_idx"});
  r.require_none("padding_idx");
  try {
    require_default_norm(r);
    BRAID_CHECK_ARG(!r.get_bool("include_last_offset", false),
                    "argument 'include_last_offset' is only supported at its default (False)");
  } catch (const InvalidArgument& e) {
    BRAID_THROW(InvalidArgument, "{}: {}", cls, e.what());
  }
  auto m = std::make_shared<nn::EmbeddingBag>(r.get_int("num_embeddings"), r.get_int("embedding_dim"),
                                              parse_mode(r.get_string("mode", "mean")), r.get_bool("sparse", false));
  load_weight(r, cls, m->weight());
  return m;
}

struct ClassTable {
  ClassTable() {
    factories.emplace("nn.Linear", make_linear);
    factories.emplace("nn.Embedding", make_embedding);
    factories.emplace("nn.EmbeddingBag", make_embedding_bag);
  }
  std::shared_mutex mu;
  std::map<std::string, ModuleFactory, std::less<>> factories;  // GUARDED_BY(mu)
};

// A function-local static, so that registering from another file's static initializer works.
ClassTable& table() {
  static ClassTable t;
  return t;
}

}  // namespace

void register_module_class(const std::string& name, ModuleFactory factory) {
  BRAID_CHECK_ARG(!name.empty(), "register_module_class: the class name is empty");
  BRAID_CHECK_ARG(factory != nullptr, "register_module_class: the factory of '{}' is empty", name);
  ClassTable& t = table();
  std::unique_lock<std::shared_mutex> lock(t.mu);
  const bool added = t.factories.emplace(name, std::move(factory)).second;
  BRAID_CHECK_ARG(added, "register_module_class: a module class named '{}' is already registered", name);
}

bool has_module_class(const std::string& name) {
  ClassTable& t = table();
  std::shared_lock<std::shared_mutex> lock(t.mu);
  return t.factories.find(name) != t.factories.end();
}

std::vector<std::string> module_class_names() {
  ClassTable& t = table();
  std::shared_lock<std::shared_mutex> lock(t.mu);
  std::vector<std::string> names;
  for (const auto& [name, f] : t.factories) names.push_back(name);
  return names;  // std::map keeps them sorted
}

std::shared_ptr<nn::Module> make_module(const std::string& name, const Args& args) {
  ModuleFactory factory;
  {
    ClassTable& t = table();
    std::shared_lock<std::shared_mutex> lock(t.mu);
    const auto it = t.factories.find(name);
    if (it != t.factories.end()) factory = it->second;
  }
  if (!factory) {
    BRAID_THROW(InvalidArgument, "unknown module class '{}' (registered: {}); register it with "
                "dist_autograd::register_module_class on every worker before init_rpc", name,
                fmt::join(module_class_names(), ", "));
  }
  std::shared_ptr<nn::Module> module = factory(args);  // outside the lock: a factory may register classes
  BRAID_CHECK_ARG(module != nullptr, "the factory of module class '{}' returned no module", name);
  return module;
}

}  // namespace braid::dist_autograd
