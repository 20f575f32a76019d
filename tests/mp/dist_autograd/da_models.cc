#include "tests/mp/dist_autograd/da_models.h"

#include <mutex>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/op_helpers.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd/variable.h"
#include "dist_autograd/context.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "rpc/api.h"
#include "tensor/factory.h"

namespace braid::mp {

namespace {

using rpc::Args;
using rpc::Value;
using rpc::ValueList;

// The torch test's getLinear: ones, except w[0][0] = -1.
void init_get_linear_weight(const Tensor& weight) {
  std::vector<float> w(static_cast<size_t>(weight.numel()), 1.0f);
  w[0] = -1.0f;
  autograd::NoGradGuard no_grad;
  weight.copy_(from_vector(w, weight.shape()));
}

struct RemoteEM {
  RemoteEM(int64_t rows, int64_t dim, bool sparse) : em(rows, dim, nn::EmbeddingBagMode::Mean, sparse) {
    autograd::NoGradGuard no_grad;
    em.weight().fill_(0.5);
  }
  Tensor forward(const Tensor& indices) {
    const Tensor offsets = arange(indices.shape()[0], DType::Int64);
    return em.forward_many({indices, offsets})[0];
  }
  nn::EmbeddingBag em;
};

struct RemoteNet {
  RemoteNet(int64_t in, int64_t out) : fc(in, out, /*bias=*/false) { init_get_linear_weight(fc.weight()); }
  Tensor forward(const Tensor& x) { return autograd::relu(fc.forward(x)); }
  nn::Linear fc;
};

// A parameter owned by the worker that constructed it; "scaled" returns parameter * x.
struct Param {
  explicit Param(const Tensor& init) : p(init.clone()) { autograd::set_requires_grad(p); }
  Tensor p;
};

struct Trainer {
  Trainer(rpc::RRef em, rpc::RRef net) : em_rref(std::move(em)), net_rref(std::move(net)), fc1(2, 2, false), fc2(3, 1, false) {
    init_get_linear_weight(fc1.weight());
    init_get_linear_weight(fc2.weight());
  }

  // One iteration of the torch test's NONE mode in a fresh context: returns [fc1 grad, fc2 grad, worker4's em
  // grad, worker4's net grad, output, #local grads, #remote grads, whether .grad was touched].
  Value train_batch(const Tensor& dense, const Tensor& sparse, const Tensor& values) {
    dist_autograd::Context ctx;
    const Tensor sparse_out = em_rref.rpc_sync().call("forward", {Value(sparse)}).as_tensor();
    const Tensor dense_out = fc1.forward(dense);
    const Tensor x = autograd::cat({dense_out, sparse_out}, 1);
    const Tensor hidden = net_rref.rpc_sync().call("forward", {Value(x)}).as_tensor();
    const Tensor output = fc2.forward(hidden);
    const Tensor loss = autograd::sum(autograd::mul(output, values));
    dist_autograd::backward(ctx.id(), {loss});
    const dist_autograd::GradientMap grads = dist_autograd::get_gradients(ctx.id());
    const ValueList remote =
        rpc::rpc_sync("worker4", "da.remote_grads", {Value(em_rref), Value(net_rref), Value(ctx.id())}).items();
    const bool touched = autograd::grad(fc1.weight()).defined() || autograd::grad(fc2.weight()).defined();
    return ValueList{Value(grads.at(fc1.weight())), Value(grads.at(fc2.weight())), remote.at(0), remote.at(1),
                     Value(autograd::detach(output)), Value(static_cast<int64_t>(grads.size())), remote.at(2),
                     Value(touched)};
  }

  rpc::RRef em_rref;
  rpc::RRef net_rref;
  nn::Linear fc1;
  nn::Linear fc2;
};

// A result whose backward throws, to fail a remote part of the backward pass.
Tensor failing_backward(const Tensor& x) {
  return autograd::detail::record("FailingBackward", {x}, x.clone(), {},
                                  [](const autograd::TensorList&, autograd::SavedTensors&)
                                      -> autograd::TensorList {
                                    throw std::runtime_error("this backward fails on purpose");
                                  });
}

}  // namespace

void register_dist_autograd_test_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = rpc::global_registry();
    r.add_class<RemoteEM>("da.RemoteEM")
        .constructor([](const Args& a) {
          return std::make_shared<RemoteEM>(a.at(0).as_int(), a.at(1).as_int(),
                                            a.positional.size() > 2 && a.at(2).as_bool());
        })
        .method("forward", [](RemoteEM& m, const Args& a) -> Value { return m.forward(a.at(0).as_tensor()); });
    r.add_class<RemoteNet>("da.RemoteNet")
        .constructor([](const Args& a) { return std::make_shared<RemoteNet>(a.at(0).as_int(), a.at(1).as_int()); })
        .method("forward", [](RemoteNet& m, const Args& a) -> Value { return m.forward(a.at(0).as_tensor()); });
    r.add_class<Trainer>("da.Trainer")
        .constructor([](const Args& a) { return std::make_shared<Trainer>(a.at(0).as_rref(), a.at(1).as_rref()); })
        .method("train_batch", [](Trainer& t, const Args& a) -> Value {
          return t.train_batch(a.at(0).as_tensor(), a.at(1).as_tensor(), a.at(2).as_tensor());
        });
    r.add_class<Param>("da.Param")
        .constructor([](const Args& a) { return std::make_shared<Param>(a.at(0).as_tensor()); })
        .method("scaled", [](Param& p, const Args& a) -> Value { return autograd::mul(p.p, a.at(0).as_tensor()); })
        .method("grad_in", [](Param& p, const Args& a) -> Value {
          return dist_autograd::get_gradients(a.at(0).as_int()).at(p.p);
        })
        .method("grad_is_set", [](Param& p, const Args&) -> Value { return autograd::grad(p.p).defined(); });
    // worker4's context gradients of the torch test's remote modules: [em.weight, fc.weight, #entries].
    r.add_function("da.remote_grads", [](const Args& a) -> Value {
      auto& em = rpc::object_as<RemoteEM>(a.at(0).as_rref().local_value(), "da.RemoteEM");
      auto& net = rpc::object_as<RemoteNet>(a.at(1).as_rref().local_value(), "da.RemoteNet");
      const auto grads = dist_autograd::get_gradients(a.at(2).as_int());
      return ValueList{Value(grads.at(em.em.weight())), Value(grads.at(net.fc.weight())),
                       Value(static_cast<int64_t>(grads.size()))};
    });
    // The gradient of the EmbeddingBag behind an RRef in a context (may be sparse).
    r.add_function("da.em_grad", [](const Args& a) -> Value {
      auto& em = rpc::object_as<RemoteEM>(a.at(0).as_rref().local_value(), "da.RemoteEM");
      return dist_autograd::get_gradients(a.at(1).as_int()).at(em.em.weight());
    });
    r.add_function("da.mul", [](const Args& a) -> Value { return autograd::mul(a.at(0).as_tensor(), a.at(1).as_tensor()); });
    // 2x here, then squared on `next`: a graph over three workers.
    r.add_function("da.double_then_square", [](const Args& a) -> Value {
      const Tensor y = autograd::mul(a.at(0).as_tensor(), 2.0);
      return rpc::rpc_sync(a.at(1).as_string(), "da.mul", {Value(y), Value(y)});
    });
    r.add_function("da.failing_backward", [](const Args& a) -> Value { return failing_backward(a.at(0).as_tensor()); });
    r.add_function("da.has_context", [](const Args& a) -> Value { return dist_autograd::has_context(a.at(0).as_int()); });
    r.add_function("da.num_grads", [](const Args& a) -> Value {
      return static_cast<int64_t>(dist_autograd::get_gradients(a.at(0).as_int()).size());
    });
  });
}

std::vector<MiniBatch> training_examples() {
  // get_training_examples()'s loops: value in (-1, 1), x in (-value, value), y in (value, -value), z in (0, 1).
  std::vector<float> dense;
  std::vector<int64_t> sparse;
  std::vector<float> values;
  for (float value : {-1.0f, 1.0f}) {
    for (float x : {-value, value}) {
      for (float y : {value, -value}) {
        for (int64_t z : {0, 1}) {
          dense.insert(dense.end(), {x, y});
          sparse.push_back(z);
          values.push_back(value);
        }
      }
    }
  }
  std::vector<MiniBatch> batches;
  constexpr size_t kRows = 4;
  for (size_t t = 0; t < kNumTrainers; ++t) {
    const size_t r0 = t * kRows;
    batches.push_back(MiniBatch{
        from_vector(std::vector<float>(dense.begin() + 2 * r0, dense.begin() + 2 * (r0 + kRows)), {4, 2}),
        from_vector(std::vector<int64_t>(sparse.begin() + r0, sparse.begin() + r0 + kRows), {4}),
        from_vector(std::vector<float>(values.begin() + r0, values.begin() + r0 + kRows), {4})});
  }
  return batches;
}

}  // namespace braid::mp
