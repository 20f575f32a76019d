#include "dist_autograd/remote_module.h"

#include <fmt/format.h>

#include "base/check.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/remote_classes.h"
#include "rpc/api.h"

namespace braid::dist_autograd {

using rpc::Args;
using rpc::Value;
using rpc::ValueList;

namespace {

// The agent's own deadline fails a call first with the precise error; this bound is the backstop.
rpc::Millis wait_bound() { return rpc::current_agent().default_timeout() + rpc::Millis(5000); }

ValueList to_values(const nn::TensorList& inputs) {
  ValueList values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (t.defined()) values.emplace_back(t);
    else values.emplace_back();  // None
  }
  return values;
}

nn::TensorList to_tensors(const Value& out, const std::string& who) {
  if (out.is(Value::Kind::Tensor)) return {out.as_tensor()};
  BRAID_CHECK_ARG(out.is(Value::Kind::Tuple) || out.is(Value::Kind::List), "{}: forward returned {}, expected "
                  "tensors", who, out.describe());
  nn::TensorList tensors;
  for (const Value& v : out.items()) tensors.push_back(v.is_none() ? Tensor() : v.as_tensor());
  return tensors;
}

}  // namespace

RemoteModule::RemoteModule(std::string_view remote_device, const std::string& module_class, const Args& args)
    : remote_device_(RemoteDevice::parse(remote_device)), module_class_(module_class) {
  BRAID_CHECK_ARG(!module_class.empty(), "RemoteModule('{}'): the module class name is empty", remote_device);
  register_remote_classes();
  owner_ = remote_device_.worker();
  module_rref_ = rpc::remote(owner_, kHostedModuleClass,
                             Args(ValueList{Value(module_class_), Value(device().str()), rpc::list(args.positional)},
                                  args.kwargs));
  // Wait for the module (PyTorch's constructor is synchronous): an unknown class or bad arguments fail
  // here rather than at the first forward.
  try {
    module_rref_.rpc_async().call("info", {}).value(wait_bound());
  } catch (const RemoteError& e) {
    throw RemoteError(e.worker(), fmt::format("{}: creating the module failed: {}", describe(), e.remote_message()));
  } catch (const InvalidArgument& e) {
    BRAID_THROW(InvalidArgument, "{}: creating the module on worker '{}' failed: {}", describe(), owner_.name,
                e.what());
  }
}

RemoteModule::RemoteModule(RemoteDevice device, std::string module_class, rpc::RRef module_rref)
    : remote_device_(std::move(device)), module_class_(std::move(module_class)), module_rref_(std::move(module_rref)) {
  owner_ = remote_device_.worker();
}

RemoteModule RemoteModule::from_rref(std::string_view remote_device, const std::string& module_class,
                                     rpc::RRef module_rref) {
  BRAID_CHECK_ARG(module_rref.defined(), "RemoteModule('{}', {}): the module RRef is undefined", remote_device,
                  module_class);
  RemoteModule m(RemoteDevice::parse(remote_device), module_class, std::move(module_rref));
  BRAID_CHECK_ARG(m.module_rref_.owner_name() == m.owner_.name,
                  "{}: the module RRef is owned by '{}', not by the device's worker '{}'", m.describe(),
                  m.module_rref_.owner_name(), m.owner_.name);
  return m;
}

std::string RemoteModule::describe() const {
  return fmt::format("RemoteModule('{}', {})", remote_device_.str(), module_class_);
}

Future<Value> RemoteModule::forward_value_async(const Args& args) const {
  return module_rref_.rpc_async().call("forward", args);
}

Future<Tensor> RemoteModule::forward_async(const Tensor& input) const {
  return forward_value_async(Args{Value(input)}).then(
      [who = describe()](const Value& out) {
        nn::TensorList outs = to_tensors(out, who);
        BRAID_CHECK_ARG(outs.size() == 1, "{}: forward returned {} outputs; use forward_many", who, outs.size());
        return outs[0];
      },
      describe() + ".forward");
}

Future<nn::TensorList> RemoteModule::forward_many_async(const nn::TensorList& inputs) const {
  Args args;
  args.positional = to_values(inputs);
  return forward_value_async(args).then([who = describe()](const Value& out) { return to_tensors(out, who); }, describe() + ".forward_many");
}

Tensor RemoteModule::forward(const Tensor& input) const { return forward_async(input).value(wait_bound()); }

nn::TensorList RemoteModule::forward_many(const nn::TensorList& inputs) const {
  return forward_many_async(inputs).value(wait_bound());
}

std::vector<rpc::RRef> RemoteModule::remote_parameters(bool recurse) const {
  Args args;
  args.kwargs.set("recurse", Value(recurse));
  const Value out = module_rref_.rpc_async().call("parameter_rrefs", args).value(wait_bound());
  std::vector<rpc::RRef> rrefs;
  for (const Value& v : out.as_list()) rrefs.push_back(v.as_rref());
  return rrefs;
}

}  // namespace braid::dist_autograd
