// A model of one's own as a braid plugin: two Linear layers with a tanh between them and a learned output
// scale, registered as "my_net". Everything a definition needs is here: its name, a line of help, the
// argument names (anything else in model.args is rejected by `braid check`), and build(), which reads the
// arguments with defaults and draws the parameters from model.init_seed so that every trainer builds the
// same module. BRAID_PLUGIN defines the entry points the stock `braid` looks for (docs/PLUGINS.md):
//
//   model: {plugin: build/libmy_net.so, kind: my_net, args: {in: 16, width: 32, out: 4}, init_seed: 7}
#include <memory>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "runtime/plugin/plugin.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace my_project {

namespace {

using namespace braid;

class MyNet : public nn::Module {
 public:
  MyNet(int64_t in, int64_t width, int64_t out, Generator& gen) : nn::Module("MyNet") {
    hidden_ = register_module("hidden", std::make_shared<nn::Linear>(in, width, true, &gen));
    head_ = register_module("head", std::make_shared<nn::Linear>(width, out, true, &gen));
    scale_ = register_parameter("scale", ones({1}));
  }

  Tensor forward(const Tensor& x) override {
    return autograd::mul((*head_)(autograd::tanh((*hidden_)(x))), scale_);
  }

 private:
  std::shared_ptr<nn::Linear> hidden_;
  std::shared_ptr<nn::Linear> head_;
  Tensor scale_;
};

runtime::ModelDefinition my_net() {
  runtime::ModelDefinition d;
  d.name = "my_net";
  d.help = "Linear-tanh-Linear times a learned scale; args in, width (default 32), out";
  d.arg_names = {"in", "width", "out"};
  d.build = [](const runtime::ModelBuild& b) -> std::shared_ptr<nn::Module> {
    // arg_int throws "model.args.width: expected an integer, got ..." for a bad value.
    const int64_t in = b.arg_int("in");
    const int64_t width = b.arg_int("width", 32);
    const int64_t out = b.arg_int("out");
    Generator gen(b.init_seed);
    return std::make_shared<MyNet>(in, width, out, gen);
  };
  return d;
}

}  // namespace

}  // namespace my_project

BRAID_PLUGIN("my_net", "1.0") { registrar.add_model(my_project::my_net()); }
