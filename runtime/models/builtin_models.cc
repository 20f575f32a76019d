// The plain built-in models: linear, embedding_bag and mlp. Each reads its arguments once into a small
// struct (so that validate_model's check and build() agree), then builds from a generator seeded with
// model.init_seed: every trainer that builds the same spec gets bit-identical parameters, and no global
// generator is touched (the runtime may build on an RPC thread while another thread draws).
#include <fmt/format.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "runtime/models/builtin_models.h"
#include "tensor/random.h"

namespace braid::runtime::detail {

namespace {

// Parameters whose float32 values alone exceed this machine's memory can never be built: `braid check`
// (and every rank's validation) says so, naming the argument, instead of each rank failing in an
// allocation or, where the kernel overcommits memory, being killed while it initialises them. Only
// absurd sizes are refused: the model may still not fit once gradients and optimizer state are added.
void check_fits_in_memory(double parameters, const std::string& key, const std::string& what) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return;  // unknown: the allocation will tell
  const double memory = static_cast<double>(pages) * static_cast<double>(page_size);
  const double bytes = parameters * 4;
  constexpr double kGiB = 1 << 30;
  BRAID_CHECK_ARG(bytes <= memory, "{}: {} has {:.4g} parameters, {:.4g} GiB as float32, more than this machine's "
                  "{:.4g} GiB of memory", key, what, parameters, bytes / kGiB, memory / kGiB);
}

struct LinearArgs {
  int64_t in;
  int64_t out;
  bool bias;
};

LinearArgs read_linear(const ModelBuild& b) {
  const LinearArgs a{positive_arg(b, "in"), positive_arg(b, "out"), b.arg_bool("bias", true)};
  check_fits_in_memory(static_cast<double>(a.in) * static_cast<double>(a.out), "model.args.out",
                       fmt::format("Linear({}, {})", a.in, a.out));
  return a;
}

BuiltinModel linear() {
  ModelDefinition d;
  d.name = "linear";
  d.help = "nn.Linear: y = x W^T + b; args in, out, bias (default true)";
  d.arg_names = {"in", "out", "bias"};
  d.build = [](const ModelBuild& b) -> std::shared_ptr<nn::Module> {
    const LinearArgs a = read_linear(b);
    Generator gen(b.init_seed);
    return std::make_shared<nn::Linear>(a.in, a.out, a.bias, &gen);
  };
  return {std::move(d), [](const ModelBuild& b) { read_linear(b); }};
}

struct EmbeddingBagArgs {
  int64_t num_embeddings;
  int64_t embedding_dim;
  nn::EmbeddingBagMode mode;
  bool sparse;
};

EmbeddingBagArgs read_embedding_bag(const ModelBuild& b) {
  EmbeddingBagArgs a{positive_arg(b, "num_embeddings"), positive_arg(b, "embedding_dim"), nn::EmbeddingBagMode::Mean,
                     b.arg_bool("sparse", false)};
  const std::string mode = b.arg_string("mode", "mean");
  if (mode == "sum") {
    a.mode = nn::EmbeddingBagMode::Sum;
  } else if (mode == "max") {
    a.mode = nn::EmbeddingBagMode::Max;
  } else {
    BRAID_CHECK_ARG(mode == "mean", "model.args.mode: expected sum, mean or max, got \"{}\"", mode);
  }
  BRAID_CHECK_ARG(!(a.sparse && a.mode == nn::EmbeddingBagMode::Max),
                  "model.args.sparse: sparse gradients are not available with mode max");
  check_fits_in_memory(static_cast<double>(a.num_embeddings) * static_cast<double>(a.embedding_dim),
                       "model.args.num_embeddings", fmt::format("EmbeddingBag({}, {})", a.num_embeddings, a.embedding_dim));
  return a;
}

BuiltinModel embedding_bag() {
  ModelDefinition d;
  d.name = "embedding_bag";
  d.help = "nn.EmbeddingBag over int64 indices [B, L] -> [B, dim]; args num_embeddings, embedding_dim, mode "
           "(sum|mean|max, default mean), sparse (default false)";
  d.arg_names = {"num_embeddings", "embedding_dim", "mode", "sparse"};
  d.build = [](const ModelBuild& b) -> std::shared_ptr<nn::Module> {
    const EmbeddingBagArgs a = read_embedding_bag(b);
    Generator gen(b.init_seed);
    return std::make_shared<nn::EmbeddingBag>(a.num_embeddings, a.embedding_dim, a.mode, a.sparse, &gen);
  };
  return {std::move(d), [](const ModelBuild& b) { read_embedding_bag(b); }};
}

struct MlpArgs {
  std::vector<int64_t> sizes;  // in, hidden..., out
  double dropout;
  bool bias;
};

MlpArgs read_mlp(const ModelBuild& b) {
  MlpArgs a;
  a.sizes.push_back(positive_arg(b, "in"));
  const std::vector<int64_t> hidden = b.arg_ints("hidden", std::vector<int64_t>{});
  for (size_t i = 0; i < hidden.size(); ++i) {
    BRAID_CHECK_ARG(hidden[i] > 0, "model.args.hidden[{}]: must be positive, got {}", i, hidden[i]);
    a.sizes.push_back(hidden[i]);
  }
  a.sizes.push_back(positive_arg(b, "out"));
  a.dropout = b.arg_double("dropout", 0.0);
  BRAID_CHECK_ARG(a.dropout >= 0.0 && a.dropout < 1.0, "model.args.dropout: must be in [0, 1), got {}", a.dropout);
  a.bias = b.arg_bool("bias", true);
  double parameters = 0, largest = 0;
  size_t widest = 0;
  for (size_t i = 0; i + 1 < a.sizes.size(); ++i) {
    const double layer = static_cast<double>(a.sizes[i]) * static_cast<double>(a.sizes[i + 1]);
    parameters += layer;
    if (layer > largest) {
      largest = layer;
      widest = i;
    }
  }
  // The key of the largest layer's output width: hidden[i], or out for the last layer.
  const std::string key = widest + 2 < a.sizes.size() ? fmt::format("model.args.hidden[{}]", widest) : "model.args.out";
  check_fits_in_memory(parameters, key,
                       fmt::format("the mlp (its largest layer Linear({}, {}))", a.sizes[widest], a.sizes[widest + 1]));
  return a;
}

// Linear, ReLU[, Dropout], ..., Linear, children named "0", "1", ... as the torch.nn.Sequential a user
// would write (with dropout 0 this is exactly nn::MLP's layout).
std::shared_ptr<nn::Module> build_mlp(const ModelBuild& b) {
  const MlpArgs a = read_mlp(b);
  Generator gen(b.init_seed);
  auto net = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < a.sizes.size(); ++i) {
    net->push_back(std::make_shared<nn::Linear>(a.sizes[i], a.sizes[i + 1], a.bias, &gen));
    if (i + 2 == a.sizes.size()) break;  // no activation after the output layer
    net->push_back(std::make_shared<nn::ReLU>());
    // Dropout masks come from the default generator, which braid run seeds from (train.seed, rank).
    if (a.dropout > 0.0) net->push_back(std::make_shared<nn::Dropout>(a.dropout));
  }
  return net;
}

BuiltinModel mlp() {
  ModelDefinition d;
  d.name = "mlp";
  d.help = "Linear-ReLU stack; args in, hidden (list, default []), out, dropout (default 0), bias (default true)";
  d.arg_names = {"in", "hidden", "out", "dropout", "bias"};
  d.build = build_mlp;
  return {std::move(d), [](const ModelBuild& b) { read_mlp(b); }};
}

}  // namespace

std::vector<BuiltinModel> basic_models() { return {linear(), embedding_bag(), mlp()}; }

}  // namespace braid::runtime::detail
