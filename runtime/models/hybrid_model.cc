// The hybrid parameter-server model (torch's ddp_under_dist_autograd_test.py): the two worker-side module
// classes, the trainer-side HybridModel and the registry definition that ties them together (hybrid_model.h).
#include "runtime/models/hybrid_model.h"

#include <mutex>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/shape.h"
#include "base/check.h"
#include "dist_autograd/module_registry.h"
#include "nn/embedding.h"
#include "runtime/models/builtin_models.h"
#include "tensor/factory.h"

namespace braid::runtime {

namespace {

constexpr const char* kRemoteEmClass = "braid.RemoteEM";
constexpr const char* kRemoteNetClass = "braid.RemoteNet";

// The torch test's RemoteEM: an EmbeddingBag whose forward treats each index as a bag of its own.
class RemoteEM : public nn::Module {
 public:
  RemoteEM(int64_t num_embeddings, int64_t embedding_dim, bool sparse) : nn::Module("RemoteEM") {
    em_ = register_module("em", std::make_shared<nn::EmbeddingBag>(num_embeddings, embedding_dim,
                                                                   nn::EmbeddingBagMode::Mean, sparse));
    autograd::NoGradGuard no_grad;
    em_->weight().fill_(0.5);
  }
  Tensor forward(const Tensor& indices) override {
    BRAID_CHECK_ARG(indices.dim() == 1 && indices.dtype() == DType::Int64,
                    "RemoteEM: expected int64 indices of shape [B], got {} {}", indices.dtype(),
                    shape_str(indices.shape()));
    const Tensor offsets = arange(indices.shape()[0], DType::Int64);
    return (*em_)(nn::TensorList{indices, offsets})[0];
  }

 private:
  std::shared_ptr<nn::EmbeddingBag> em_;
};

// The torch test's RemoteNet: relu(getLinear(d_in, d_out)(x)).
class RemoteNet : public nn::Module {
 public:
  RemoteNet(int64_t d_in, int64_t d_out) : nn::Module("RemoteNet") {
    fc_ = register_module("fc", hybrid_linear(d_in, d_out));
  }
  Tensor forward(const Tensor& x) override { return autograd::relu((*fc_)(x)); }

 private:
  std::shared_ptr<nn::Linear> fc_;
};

int64_t positive(const dist_autograd::ArgReader& r, const char* cls, const std::string& name) {
  const int64_t v = r.get_int(name);
  BRAID_CHECK_ARG(v > 0, "{}: argument '{}' must be positive, got {}", cls, name, v);
  return v;
}

struct HybridArgs {
  int64_t num_embeddings;
  int64_t embedding_dim;
  int64_t d_dense;
  int64_t d_hid;
  int64_t d_out;
  bool sparse;
};

// The torch test's constants are the defaults: NUM_EM_ROW 2, D_SPARSE 3, D_DENSE 2, D_HID 3, D_OUT 1.
HybridArgs read_hybrid(const ModelBuild& b) {
  HybridArgs a{detail::positive_arg(b, "num_embeddings", 2), detail::positive_arg(b, "embedding_dim", 3),
               detail::positive_arg(b, "d_dense", 2),        detail::positive_arg(b, "d_hid", 3),
               detail::positive_arg(b, "d_out", 1),          b.arg_bool("sparse", false)};
  // The driver reads `worker` (a name or a rank) to place the remote parts; only its type is checked here.
  if (b.args.contains("worker")) {
    const nlohmann::json& w = b.args.at("worker");
    BRAID_CHECK_ARG(w.is_string() || w.is_number_integer(), "model.args.worker: expected a worker name or rank, "
                    "got {}", w.dump());
  }
  return a;
}

std::vector<RemotePart> hybrid_remote_parts(const nlohmann::json& args) {
  static const nlohmann::json kNoLayers = nlohmann::json::array();
  const ModelBuild b{args, kNoLayers, 0, {}, nullptr};
  const HybridArgs a = read_hybrid(b);
  return {
      RemotePart{"em", kRemoteEmClass, rpc::Args{a.num_embeddings, a.embedding_dim, a.sparse}},
      RemotePart{"net", kRemoteNetClass, rpc::Args{a.d_dense + a.embedding_dim, a.d_hid}},
  };
}

std::shared_ptr<nn::Module> build_hybrid(const ModelBuild& b) {
  const HybridArgs a = read_hybrid(b);
  BRAID_CHECK_ARG(b.remote.size() == 2 && b.remote[0] != nullptr && b.remote[1] != nullptr,
                  "model 'hybrid': build needs its 2 remote parts (em, net) already created, got {}", b.remote.size());
  return std::make_shared<HybridModel>(b.remote[0], b.remote[1], a.d_dense, a.d_hid, a.d_out, b.wrap_inside);
}

}  // namespace

void register_hybrid_module_classes() {
  static std::once_flag once;
  std::call_once(once, [] {
    dist_autograd::register_module_class(kRemoteEmClass, [](const rpc::Args& args) {
      const dist_autograd::ArgReader r(kRemoteEmClass, args, {"num_embeddings", "embedding_dim", "sparse"});
      return std::make_shared<RemoteEM>(positive(r, kRemoteEmClass, "num_embeddings"),
                                        positive(r, kRemoteEmClass, "embedding_dim"), r.get_bool("sparse", false));
    });
    dist_autograd::register_module_class(kRemoteNetClass, [](const rpc::Args& args) {
      const dist_autograd::ArgReader r(kRemoteNetClass, args, {"d_in", "d_out"});
      return std::make_shared<RemoteNet>(positive(r, kRemoteNetClass, "d_in"), positive(r, kRemoteNetClass, "d_out"));
    });
  });
}

std::shared_ptr<nn::Linear> hybrid_linear(int64_t in_features, int64_t out_features) {
  auto fc = std::make_shared<nn::Linear>(in_features, out_features, /*bias=*/false);
  std::vector<float> w(static_cast<size_t>(in_features * out_features), 1.0f);
  w[0] = -1.0f;
  autograd::NoGradGuard no_grad;
  fc->weight().copy_(from_vector(w, fc->weight().shape()));
  return fc;
}

HybridModel::HybridModel(std::shared_ptr<dist_autograd::RemoteModule> em,
                         std::shared_ptr<dist_autograd::RemoteModule> net, int64_t d_dense, int64_t d_hid,
                         int64_t d_out,
                         const std::function<std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>)>& wrap_inside)
    : nn::Module("HybridModel"), em_(std::move(em)), net_(std::move(net)) {
  fc1_ = register_module("fc1", hybrid_linear(d_dense, d_dense));
  fc2_ = register_module("fc2", hybrid_linear(d_hid, d_out));
  fc2_runner_ = fc2_;
  if (wrap_inside) {
    fc2_runner_ = wrap_inside(fc2_);
    BRAID_CHECK_ARG(fc2_runner_ != nullptr, "model 'hybrid': ddp.mode inside's wrapper returned no module for fc2");
  }
}

nn::TensorList HybridModel::forward_many(const nn::TensorList& inputs) {
  BRAID_CHECK_ARG(inputs.size() == 2, "HybridModel: expected 2 inputs (dense features, sparse indices), got {}",
                  inputs.size());
  const Tensor& dense_in = inputs[0];
  const Tensor& sparse_in = inputs[1];
  BRAID_CHECK_ARG(dense_in.dim() == 2 && sparse_in.dim() == 1 && dense_in.shape()[0] == sparse_in.shape()[0],
                  "HybridModel: expected dense [B, {}] and sparse [B] with the same B, got dense {} and sparse {}",
                  fc1_->in_features(), shape_str(dense_in.shape()), shape_str(sparse_in.shape()));
  // The remote embedding goes first, as in the torch test (the order of the RPCs fixes the order of the
  // distributed backward's sends).
  // The remote parts answer with CPU tensors; the trainer's own layers may be on CUDA (devices.trainers).
  const Device here = dense_in.device();
  const Tensor sparse = autograd::to(em_->forward(sparse_in), here);
  const Tensor dense = (*fc1_)(dense_in);
  const Tensor hidden = autograd::to(net_->forward(autograd::cat({dense, sparse}, 1)), here);
  return {(*fc2_runner_)(hidden)};
}

void HybridModel::train(bool on) {
  nn::Module::train(on);
  if (fc2_runner_ != fc2_) fc2_runner_->train(on);
}

namespace detail {

BuiltinModel hybrid_model() {
  register_hybrid_module_classes();
  ModelDefinition d;
  d.name = "hybrid";
  d.help = "the parameter-server model of torch's ddp_under_dist_autograd_test: RemoteEM and RemoteNet on a "
           "worker, fc1 and fc2 on each trainer; args num_embeddings (2), embedding_dim (3), d_dense (2), "
           "d_hid (3), d_out (1), sparse (false), worker";
  d.arg_names = {"num_embeddings", "embedding_dim", "d_dense", "d_hid", "d_out", "sparse", "worker"};
  d.remote_parts = hybrid_remote_parts;
  d.build = build_hybrid;
  d.supports_inside_ddp = true;
  return {std::move(d), [](const ModelBuild& b) { read_hybrid(b); }};
}

}  // namespace detail

}  // namespace braid::runtime
