#include "tests/mp/dist_autograd/remote_module_mp.h"

#include <mutex>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "dist_autograd/context.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/module_registry.h"
#include "nn/linear.h"
#include "rpc/api.h"

namespace braid::mp {

using rpc::Args;
using rpc::Value;

void register_remote_module_test_classes() {
  static std::once_flag once;
  std::call_once(once, [] {
    dist_autograd::register_module_class("rm.FixedLinear", [](const Args& a) {
      const dist_autograd::ArgReader r("rm.FixedLinear", a, {"weight", "bias"});
      const Tensor& w = r.find("weight")->as_tensor();
      const Value* b = r.find("bias");
      const bool has_bias = b != nullptr && !b->is_none();
      auto m = std::make_shared<nn::Linear>(w.shape()[1], w.shape()[0], has_bias);
      autograd::NoGradGuard no_grad;
      m->parameter("weight").copy_(w);
      if (has_bias) m->parameter("bias").copy_(b->as_tensor());
      return m;
    });
    auto& r = rpc::global_registry();
    r.add_function("rm.load_params", [](const Args& a) -> Value {
      const auto module = dist_autograd::local_module(a.at(0).as_rref());
      const nn::TensorList params = module->parameters();
      const rpc::ValueList& values = a.at(1).as_list();
      BRAID_CHECK_ARG(values.size() == params.size(), "rm.load_params: {} values for {} parameters", values.size(),
                      params.size());
      autograd::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(values[i].as_tensor());
      return Value();
    });
    r.add_function("rm.context_grads", [](const Args& a) -> Value {
      const auto module = dist_autograd::local_module(a.at(0).as_rref());
      const dist_autograd::GradientMap grads = dist_autograd::get_gradients(a.at(1).as_int());
      rpc::ValueList out;
      for (const Tensor& p : module->parameters()) {
        const Tensor* g = grads.find(p);
        out.push_back(g != nullptr ? Value(*g) : Value());
      }
      return rpc::list(std::move(out));
    });
  });
}

}  // namespace braid::mp
