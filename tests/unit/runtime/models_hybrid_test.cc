// The "hybrid" model (the parameter-server model of PyTorch's ddp_under_dist_autograd_test.py) built from
// the registry in a one-worker RPC job: its remote parts are made through RemoteModule on "worker0" (this
// process, through the same RPC path as across processes), and trainer 0's forward and distributed backward
// give the values PyTorch gives (tests/mp/dist_autograd/hybrid_reference.txt).
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/ops/elementwise.h"
#include "dist_autograd/context.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/remote_module.h"
#include "nn/linear.h"
#include "runtime/models/hybrid_model.h"
#include "runtime/models/loss.h"
#include "runtime/models/model_registry.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/dist_autograd/solo_rpc.h"

namespace braid::runtime {

namespace {

using nlohmann::json;

Tensor floats(std::vector<float> values, Shape shape) { return from_vector(values, shape); }

// The remote parts as the driver creates them: each part's class and args on its worker.
std::vector<std::shared_ptr<dist_autograd::RemoteModule>> make_remote_parts(const ModelDefinition& def,
                                                                              const json& args) {
  std::vector<std::shared_ptr<dist_autograd::RemoteModule>> parts;
  for (const RemotePart& p : def.remote_parts(args)) {
    parts.push_back(std::make_shared<dist_autograd::RemoteModule>("worker0/cpu", p.module_class, p.args));
  }
  return parts;
}

}  // namespace

TEST_CASE("models: hybrid's remote parts are RemoteEM(2, 3) and RemoteNet(5, 3)", "[models][hybrid]") {
  const ModelDefinition& def = get_model("hybrid");
  CHECK(def.supports_inside_ddp);
  const std::vector<RemotePart> parts = def.remote_parts(json::object());
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].name == "em");
  CHECK(parts[0].module_class == "braid.RemoteEM");
  CHECK(parts[0].args.positional.at(0).as_int() == 2);
  CHECK(parts[0].args.positional.at(1).as_int() == 3);
  CHECK_FALSE(parts[0].args.positional.at(2).as_bool());
  CHECK(parts[1].name == "net");
  CHECK(parts[1].module_class == "braid.RemoteNet");
  CHECK(parts[1].args.positional.at(0).as_int() == 5);  // d_dense + embedding_dim
  CHECK(parts[1].args.positional.at(1).as_int() == 3);
  const std::vector<RemotePart> wide = def.remote_parts(json{{"embedding_dim", 4}, {"d_dense", 6}, {"sparse", true}});
  CHECK(wide[1].args.positional.at(0).as_int() == 10);
  CHECK(wide[0].args.positional.at(2).as_bool());
  // build() without its remote parts says what is missing.
  const json args = json::object();
  CHECK_THROWS_WITH(def.build(ModelBuild{args, json::array(), 0, {}, nullptr}),
                    Catch::Matchers::Contains("build needs its 2 remote parts (em, net)"));
}

TEST_CASE("models: hybrid forward and distributed backward give PyTorch's trainer-0 values", "[models][hybrid]") {
  register_hybrid_module_classes();  // before the RPC job starts, as on a worker
  dist_autograd::testing::SoloRpc job;
  const ModelDefinition& def = get_model("hybrid");
  const json args = json::object();
  ModelBuild b{args, json::array(), 0, make_remote_parts(def, args), nullptr};
  const std::shared_ptr<nn::Module> model = def.build(b);
  auto hybrid = std::dynamic_pointer_cast<HybridModel>(model);
  REQUIRE(hybrid != nullptr);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"fc1.weight", "fc2.weight"});
  CHECK(equal(hybrid->fc1()->weight(), floats({-1, 1, 1, 1}, {2, 2})));

  // Trainer 0's mini-batch: the first block of four of get_training_examples().
  const Tensor dense = floats({1, -1, 1, -1, 1, 1, 1, 1}, {4, 2});
  const Tensor sparse = from_vector(std::vector<int64_t>{0, 1, 0, 1}, {4});
  const Tensor values = full({4}, -1.0f);
  {
    dist_autograd::Context ctx;
    const Tensor output = (*model)(nn::TensorList{dense, sparse})[0];
    CHECK(equal(output, floats({-3.5f, -3.5f, 3.5f, 3.5f}, {4, 1})));
    const Tensor loss = compute_loss(LossKind::WeightedSum, output, values);
    CHECK(loss.item<double>() == 0.0);
    dist_autograd::backward(ctx.id(), {loss});
    const dist_autograd::GradientMap grads = dist_autograd::get_gradients(ctx.id());
    CHECK(equal(grads.at(hybrid->fc1()->weight()), floats({-32, -16, 0, -16}, {2, 2})));
    CHECK(equal(grads.at(hybrid->fc2()->weight()), floats({-56, -28, -28}, {1, 3})));
    // The worker's side (this process): em.weight all 0, RemoteNet's fc.weight as PyTorch gives it
    // (hybrid_reference.txt).
    const auto em = dist_autograd::local_module(b.remote[0]->module_rref());
    const auto net = dist_autograd::local_module(b.remote[1]->module_rref());
    CHECK(equal(grads.at(em->parameter("em.weight")), zeros({2, 3})));
    CHECK(equal(grads.at(net->parameter("fc.weight")),
                floats({-16, 16, 8, 8, 8, 0, -16, -4, -4, -4, 0, -16, -4, -4, -4}, {3, 5})));
    CHECK(grads.size() == 4);
  }
  CHECK_THROWS_WITH((*model)(nn::TensorList{dense, from_vector(std::vector<int64_t>{0, 1}, {2})}),
                    Catch::Matchers::Contains("HybridModel: expected dense [B, 2] and sparse [B] with the same B"));
}

TEST_CASE("models: hybrid with inside DDP runs fc2 through the wrapper and keeps its names", "[models][hybrid]") {
  dist_autograd::testing::SoloRpc job;
  const ModelDefinition& def = get_model("hybrid");
  const json args = json::object();
  int wrapped = 0;
  std::shared_ptr<nn::Module> wrapper;
  // A stand-in for DDP: a module that holds fc2 as "module" and doubles its output, so the test sees it ran.
  class Doubler : public nn::Module {
   public:
    explicit Doubler(std::shared_ptr<nn::Module> inner) : nn::Module("Doubler") { inner_ = register_module("module", inner); }
    Tensor forward(const Tensor& x) override { return autograd::mul((*inner_)(x), 2.0); }

   private:
    std::shared_ptr<nn::Module> inner_;
  };
  ModelBuild b{args, json::array(), 0, make_remote_parts(def, args),
               [&](std::shared_ptr<nn::Module> fc2) {
                 ++wrapped;
                 wrapper = std::make_shared<Doubler>(std::move(fc2));
                 return wrapper;
               }};
  const std::shared_ptr<nn::Module> model = def.build(b);
  CHECK(wrapped == 1);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"fc1.weight", "fc2.weight"});
  const Tensor dense = floats({1, -1, 1, -1, 1, 1, 1, 1}, {4, 2});
  const Tensor sparse = from_vector(std::vector<int64_t>{0, 1, 0, 1}, {4});
  CHECK(equal((*model)(nn::TensorList{dense, sparse})[0], floats({-7, -7, 7, 7}, {4, 1})));
  model->eval();
  CHECK_FALSE(wrapper->is_training());
}

}  // namespace braid::runtime
