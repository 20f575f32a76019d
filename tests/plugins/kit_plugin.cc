// A test plugin that registers one of everything a plugin may add, for tests/unit/runtime/plugin_test.cc and
// tests/e2e/plugin_e2e_test.py:
//   model "throwing_net"        build() throws "out of cheese" (a plugin failing on every trainer)
//   loss "abs_mean"             mean(|output - onehot(target)|) over [N, C] logits
//   data kind "ramp"            args n, features, classes: sample i has features (i+j) % 7 / 7, class i % classes
//   comm hook "logged_allreduce" the default allreduce, logging "logged_allreduce: bucket 0" to stderr once
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "nn/linear.h"
#include "parallel/ddp/default_hooks.h"
#include "runtime/plugin/plugin.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace {

using namespace braid;

class Ramp final : public runtime::Dataset {
 public:
  Ramp(int64_t n, int64_t features, int classes) : n_(n), features_(features), classes_(classes) {}
  int64_t size() const override { return n_; }
  int num_classes() const override { return classes_; }
  int num_features() const override { return static_cast<int>(features_); }
  runtime::Batch gather(const std::vector<int64_t>& indices) const override {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t i : indices) {
      if (i < 0 || i >= n_) throw std::out_of_range("ramp: index out of range");
      for (int64_t j = 0; j < features_; ++j) x.push_back(static_cast<float>((i + j) % 7) / 7.0f);
      y.push_back(i % classes_);
    }
    const auto rows = static_cast<int64_t>(indices.size());
    return {{from_vector(x, {rows, features_})}, from_vector(y, {rows})};
  }

 private:
  int64_t n_;
  int64_t features_;
  int classes_;
};

}  // namespace

BRAID_PLUGIN("test_kit", "0.3") {
  runtime::ModelDefinition throwing;
  throwing.name = "throwing_net";
  throwing.help = "throws while building";
  throwing.build = [](const runtime::ModelBuild&) -> std::shared_ptr<nn::Module> {
    throw std::runtime_error("out of cheese");
  };
  registrar.add_model(std::move(throwing));

  registrar.add_loss({"abs_mean", "mean absolute difference to the one-hot target",
                      [](const Tensor& output, const Tensor& target) {
                        const int64_t n = output.size(0);
                        const int64_t c = output.size(1);
                        std::vector<float> hot(static_cast<size_t>(n * c), 0.0f);
                        const std::vector<int64_t> t = to_vector<int64_t>(target);
                        for (int64_t i = 0; i < n; ++i) hot[static_cast<size_t>(i * c + t[static_cast<size_t>(i)])] = 1;
                        const Tensor diff = autograd::sub(output, from_vector(hot, {n, c}));
                        return autograd::mean(autograd::abs(diff));
                      }});

  registrar.add_dataset({"ramp", "a deterministic classification ramp", {"n", "features", "classes"},
                         [](const runtime::DatasetBuild& b) -> std::unique_ptr<runtime::Dataset> {
                           if (b.split == runtime::Split::Test) return nullptr;
                           const auto& a = b.args;
                           return std::make_unique<Ramp>(a.value("n", 64), a.value("features", 4),
                                                         a.value("classes", 2));
                         }});

  registrar.add_comm_hook({"logged_allreduce", "allreduce, logging its first bucket", {},
                           [](const runtime::CommHookBuild& b) {
                             parallel::NamedCommHook inner = parallel::allreduce_hook(b.group);
                             auto logged = std::make_shared<bool>(false);
                             return parallel::NamedCommHook{
                                 "logged_allreduce", [inner, logged](parallel::GradBucket& bucket) {
                                   if (!*logged) {
                                     *logged = true;
                                     std::fprintf(stderr, "logged_allreduce: bucket %zu\n", bucket.index());
                                   }
                                   return inner.hook(bucket);
                                 }};
                           }});
}
