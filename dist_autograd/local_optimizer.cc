#include "dist_autograd/local_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "base/check.h"
#include "dist_autograd/context.h"
#include "dist_autograd/step_order.h"

namespace braid::dist_autograd {

using rpc::Args;
using rpc::Value;

namespace {

// One field of an options struct, by name: how it is written to and read from the dict.
template <class O>
struct Field {
  const char* name;
  double O::*number = nullptr;
  bool O::*flag = nullptr;
};

template <class O>
std::vector<Field<O>> fields_of();

template <>
std::vector<Field<nn::optim::SGDOptions>> fields_of() {
  using O = nn::optim::SGDOptions;
  return {{"lr", &O::lr}, {"momentum", &O::momentum}, {"dampening", &O::dampening},
          {"weight_decay", &O::weight_decay}, {"nesterov", nullptr, &O::nesterov}, {"maximize", nullptr, &O::maximize}};
}

template <class O>
std::vector<Field<O>> adam_fields() {
  return {{"lr", &O::lr},        {"beta1", &O::beta1},
          {"beta2", &O::beta2},  {"eps", &O::eps},
          {"weight_decay", &O::weight_decay}, {"amsgrad", nullptr, &O::amsgrad},
          {"maximize", nullptr, &O::maximize}};
}
template <>
std::vector<Field<nn::optim::AdamOptions>> fields_of() {
  return adam_fields<nn::optim::AdamOptions>();
}
template <>
std::vector<Field<nn::optim::AdamWOptions>> fields_of() {
  return adam_fields<nn::optim::AdamWOptions>();
}

template <class O>
rpc::Dict encode(const std::string& kind, const O& o) {
  rpc::Dict d;
  d.set("kind", Value(kind));
  for (const auto& f : fields_of<O>()) d.set(f.name, f.number != nullptr ? Value(o.*f.number) : Value(o.*f.flag));
  return d;
}

template <class O>
O decode(const std::string& kind, const rpc::Dict& d) {
  O o;
  const auto fields = fields_of<O>();
  for (const auto& [key, value] : d.items) {
    if (key == "kind") continue;
    const auto it = std::find_if(fields.begin(), fields.end(), [&](const Field<O>& f) { return key == f.name; });
    BRAID_CHECK_ARG(it != fields.end(), "DistributedOptimizer: {} has no option '{}'", kind, key);
    try {
      if (it->number != nullptr) o.*(it->number) = value.as_double();
      else o.*(it->flag) = value.as_bool();
    } catch (const InvalidArgument& e) {
      BRAID_THROW(InvalidArgument, "DistributedOptimizer: {} option '{}': {}", kind, key, e.what());
    }
  }
  return o;
}

// PyTorch's _LocalOptimizer.global_lock: one step at a time per process.
std::mutex& step_lock() {
  static std::mutex mu;
  return mu;
}

}  // namespace

std::string optimizer_kind(const OptimizerOptions& options) {
  switch (options.index()) {
    case 0: return "SGD";
    case 1: return "Adam";
    default: return "AdamW";
  }
}

Value encode_optimizer_options(const OptimizerOptions& options) {
  const std::string kind = optimizer_kind(options);
  return Value(std::visit([&](const auto& o) { return encode(kind, o); }, options));
}

OptimizerOptions decode_optimizer_options(const Value& value) {
  const rpc::Dict& d = value.as_dict();
  const Value* kind_value = d.find("kind");
  BRAID_CHECK_ARG(kind_value != nullptr, "DistributedOptimizer: the optimizer options name no 'kind'");
  const std::string& kind = kind_value->as_string();
  if (kind == "SGD") return decode<nn::optim::SGDOptions>(kind, d);
  if (kind == "Adam") return decode<nn::optim::AdamOptions>(kind, d);
  if (kind == "AdamW") return decode<nn::optim::AdamWOptions>(kind, d);
  BRAID_THROW(InvalidArgument, "DistributedOptimizer: unknown optimizer kind '{}' (known: SGD, Adam, AdamW)", kind);
}

std::unique_ptr<nn::optim::Optimizer> make_optimizer(const OptimizerOptions& options, nn::TensorList params) {
  return std::visit(
      [&](const auto& o) -> std::unique_ptr<nn::optim::Optimizer> {
        using O = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<O, nn::optim::SGDOptions>) {
          return std::make_unique<nn::optim::SGD>(std::move(params), o);
        } else if constexpr (std::is_same_v<O, nn::optim::AdamOptions>) {
          return std::make_unique<nn::optim::Adam>(std::move(params), o);
        } else {
          return std::make_unique<nn::optim::AdamW>(std::move(params), o);
        }
      },
      options);
}

LocalOptimizer::LocalOptimizer(std::unique_ptr<nn::optim::Optimizer> optimizer) : optimizer_(std::move(optimizer)) {
  BRAID_ASSERT(optimizer_ != nullptr, "LocalOptimizer without an optimizer");
}

size_t LocalOptimizer::step(int64_t context_id) {
  const GradientMap grads = get_gradients(context_id);
  nn::optim::ParamGrads param_grads;
  for (const Tensor& p : optimizer_->params()) {
    if (const Tensor* g = grads.find(p)) param_grads.emplace_back(p, *g);
  }
  std::lock_guard<std::mutex> lock(step_lock());
  optimizer_->step_with(param_grads);
  return param_grads.size();
}

nn::StateDict LocalOptimizer::state_dict() const {
  std::lock_guard<std::mutex> lock(step_lock());
  return optimizer_->state_dict().to_flat();
}

void LocalOptimizer::load_state_dict(const nn::StateDict& flat) {
  const auto dict = nn::optim::OptimizerStateDict::from_flat(flat);
  std::lock_guard<std::mutex> lock(step_lock());
  optimizer_->load_state_dict(dict);
}

void register_local_optimizer_class(rpc::Registry& registry) {
  registry.add_class<LocalOptimizer>(kLocalOptimizerClass)
      .constructor([](const Args& a) {
        const OptimizerOptions options = decode_optimizer_options(a.at(0));
        nn::TensorList params;
        const rpc::ValueList& rrefs = a.at(1).as_list();
        for (size_t i = 0; i < rrefs.size(); ++i) {
          const rpc::RRef& rref = rrefs[i].as_rref();
          const Value v = rref.local_value();  // this worker owns it: DistributedOptimizer grouped by owner
          BRAID_CHECK_ARG(v.is(Value::Kind::Tensor), "parameter RRef {} ({}) holds {}, not a tensor", i,
                          rref.describe(), v.describe());
          params.push_back(v.as_tensor());
        }
        return std::make_shared<LocalOptimizer>(make_optimizer(options, std::move(params)));
      })
      .method("step",
              [](LocalOptimizer& o, const Args& a) { return Value(static_cast<int64_t>(o.step(a.at(0).as_int()))); })
      .async_method("step_in_turn",
                    [](LocalOptimizer& o, const Args& a) {
                      const int64_t context_id = a.at(0).as_int();
                      // The step may run after this call has returned, on another participant's call's
                      // thread: it holds the optimizer until then.
                      return StepOrder::instance().submit(decode_step_turn(a.at(1)), [self = o.shared_from_this(),
                                                                                     context_id] {
                        return Value(static_cast<int64_t>(self->step(context_id)));
                      });
                    })
      .method("num_params",
              [](LocalOptimizer& o, const Args&) { return Value(static_cast<int64_t>(o.optimizer().num_params())); })
      .method("state_dict",
              [](LocalOptimizer& o, const Args&) {
                rpc::Dict d;
                for (auto& [key, t] : o.state_dict()) d.set(key, Value(t));
                return Value(std::move(d));
              })
      .method("load_state_dict", [](LocalOptimizer& o, const Args& a) {
        nn::StateDict flat;
        for (const auto& [key, v] : a.at(0).as_dict().items) flat.emplace_back(key, v.as_tensor());
        o.load_state_dict(flat);
        return Value();
      });
}

}  // namespace braid::dist_autograd
