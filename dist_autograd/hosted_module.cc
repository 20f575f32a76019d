#include "dist_autograd/hosted_module.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/ops/op_helpers.h"
#include "autograd/ops/shape.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "base/fault_injection.h"
#include "dist_autograd/module_registry.h"
#include "tensor/cuda/device_api.h"

namespace braid::dist_autograd {

using rpc::Args;
using rpc::Value;
using rpc::ValueList;

namespace {

Tensor detached_copy(const Tensor& t) {
  autograd::NoGradGuard no_grad;
  return autograd::detach(t).clone();
}

}  // namespace

HostedModule::HostedModule(std::string class_name, std::shared_ptr<nn::Module> module, Device device)
    : class_name_(std::move(class_name)), module_(std::move(module)), device_(device) {
  BRAID_ASSERT(module_ != nullptr, "HostedModule of '{}' without a module", class_name_);
}

Value HostedModule::forward(const Args& args) {
  fault::point("forward");  // BRAID_FAULT: a worker's "forward", serving a remote part
  BRAID_CHECK_ARG(args.kwargs.items.empty(), "RemoteModule.forward of '{}': keyword arguments are not supported "
                  "(got {})", class_name_, args.kwargs.items.size());
  nn::TensorList inputs;
  inputs.reserve(args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& v = args.positional[i];
    BRAID_CHECK_ARG(v.is_none() || v.is(Value::Kind::Tensor), "RemoteModule.forward of '{}': argument {} is {}, "
                    "expected a tensor or None", class_name_, i, v.describe());
    inputs.push_back(v.is_none() ? Tensor() : autograd::to(v.as_tensor(), device_));
  }
  BRAID_CHECK_ARG(!inputs.empty(), "RemoteModule.forward of '{}': no inputs", class_name_);
  nn::TensorList outputs;
  {
    std::lock_guard<std::mutex> lock(forward_mu_);
    outputs = (*module_)(inputs);
  }
  if (outputs.size() == 1) return Value(autograd::to(outputs[0], Device::cpu()));
  ValueList items;
  items.reserve(outputs.size());
  for (const Tensor& t : outputs) items.emplace_back(autograd::to(t, Device::cpu()));
  return rpc::tuple(std::move(items));
}

Value HostedModule::parameter_rrefs(bool recurse) const {
  ValueList rrefs;
  for (const Tensor& p : module_->parameters(recurse)) rrefs.emplace_back(rpc::RRef::local(Value(p)));
  return rpc::list(std::move(rrefs));
}

Value HostedModule::info() const {
  rpc::Dict d;
  d.set("class", Value(class_name_));
  d.set("type", Value(module_->type_name()));
  d.set("device", Value(device_.str()));
  d.set("num_parameters", Value(static_cast<int64_t>(module_->parameters().size())));
  return Value(std::move(d));
}

Value HostedModule::state() const {
  rpc::Dict d;
  for (const auto& [name, t] : module_->state_dict()) d.set(name, Value(detached_copy(t)));
  return Value(std::move(d));
}

void register_hosted_module_class(rpc::Registry& registry) {
  registry.add_class<HostedModule>(kHostedModuleClass)
      .constructor([](const Args& a) {
        const std::string& cls = a.at(0).as_string();
        const Device device = Device::parse(a.at(1).as_string());
        const ValueList& module_args = a.at(2).as_list();
        std::shared_ptr<nn::Module> module = make_module(cls, Args(module_args, a.kwargs));
        if (device.is_cuda()) {
          cuda::check_device(device, "RemoteModule");
          module->to(device);
        }
        return std::make_shared<HostedModule>(cls, std::move(module), device);
      })
      .method("forward", [](HostedModule& m, const Args& a) { return m.forward(a); })
      .method("parameter_rrefs",
              [](HostedModule& m, const Args& a) { return m.parameter_rrefs(a.kwarg("recurse", Value(true)).as_bool()); })
      .method("info", [](HostedModule& m, const Args&) { return m.info(); })
      .to_value([](const HostedModule& m) { return m.state(); });
}

std::shared_ptr<nn::Module> local_module(const rpc::RRef& module_rref) {
  const Value v = module_rref.local_value();
  return rpc::object_as<HostedModule>(v, kHostedModuleClass).module();
}

nn::StateDict state_dict_of(const Value& module_value) {
  if (module_value.is(Value::Kind::Object)) {
    nn::StateDict out;
    const auto& m = rpc::object_as<HostedModule>(module_value, kHostedModuleClass);
    for (const auto& [name, t] : m.module()->state_dict()) out.emplace_back(name, detached_copy(t));
    return out;
  }
  BRAID_CHECK_ARG(module_value.is(Value::Kind::Dict), "state_dict_of: expected a RemoteModule's module (a dict "
                  "from to_here(), or the object on its owner), got {}", module_value.describe());
  nn::StateDict out;
  for (const auto& [name, v] : module_value.as_dict().items) out.emplace_back(name, v.as_tensor());
  return out;
}

}  // namespace braid::dist_autograd
