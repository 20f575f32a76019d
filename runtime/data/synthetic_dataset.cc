// The synthetic dataset: samples labelled by a fixed random "teacher", so that a model can learn them.
//
// The teacher is a linear map W (C x F) and bias b drawn from data.seed (C = num_classes, or 1 for
// regression). A sample is x ~ U(-1, 1)^F; its label is argmax_c (W x + b + e)_c, or its regression
// target W x + b + e, where e ~ 0.1 * U(-1, 1) per output keeps the task from being perfectly separable.
// W's entries are U(-a, a) with a = 3 / sqrt(F), which gives every logit unit variance whatever F is.
//
// The train split draws num_samples samples from one stream of the generator, the test split
// max(1, num_samples / 4) from another; a test sample equal to a training sample is redrawn, so the two
// splits are disjoint. Everything comes from runtime/data/split_mix.h and is done in double precision with
// explicit fused multiply-adds, so every trainer (and every platform) builds the same bits.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

#include "base/check.h"
#include "runtime/data/split_mix.h"
#include "runtime/data/tabular_dataset.h"
#include "tensor/factory.h"

namespace braid::runtime::data {

namespace {

constexpr uint64_t kTeacherStream = 1;
constexpr uint64_t kTrainStream = 2;
constexpr uint64_t kTestStream = 3;
constexpr double kNoise = 0.1;
constexpr int64_t kMaxElements = int64_t{1} << 30;  // 4 GiB of float32 features

struct Teacher {
  int outputs;
  int features;
  std::vector<double> weight;  // outputs x features, row-major
  std::vector<double> bias;

  Teacher(uint64_t seed, int outputs_, int features_) : outputs(outputs_), features(features_) {
    SplitMix64 gen(seed, kTeacherStream);
    const double a = 3.0 / std::sqrt(static_cast<double>(features));
    weight.resize(static_cast<size_t>(outputs) * static_cast<size_t>(features));
    for (double& w : weight) w = a * gen.uniform_pm1();
    bias.resize(static_cast<size_t>(outputs));
    for (double& b : bias) b = 0.25 * gen.uniform_pm1();
  }

  // The noisy outputs W x + b + e for one sample; `gen` supplies e.
  std::vector<double> outputs_for(const float* x, SplitMix64& gen) const {
    std::vector<double> y(bias);
    for (int o = 0; o < outputs; ++o) {
      const double* w = weight.data() + static_cast<size_t>(o) * static_cast<size_t>(features);
      for (int j = 0; j < features; ++j) y[o] = std::fma(w[j], static_cast<double>(x[j]), y[o]);
      y[o] += kNoise * gen.uniform_pm1();
    }
    return y;
  }
};

// The samples of one stream; rows found in `exclude` (the training rows' bytes) are redrawn.
struct Samples {
  std::vector<float> features;
  std::vector<int64_t> labels;
  std::vector<float> targets;
};

std::string row_key(const float* x, int features) {
  return {reinterpret_cast<const char*>(x), static_cast<size_t>(features) * sizeof(float)};
}

Samples draw(const Teacher& teacher, uint64_t seed, uint64_t stream, int64_t n, bool classes,
             const std::unordered_set<std::string>* exclude) {
  SplitMix64 gen(seed, stream);
  const int f = teacher.features;
  Samples s;
  s.features.resize(static_cast<size_t>(n) * static_cast<size_t>(f));
  for (int64_t i = 0; i < n; ++i) {
    float* x = s.features.data() + static_cast<size_t>(i) * static_cast<size_t>(f);
    do {
      for (int j = 0; j < f; ++j) x[j] = static_cast<float>(gen.uniform_pm1());
    } while (exclude != nullptr && exclude->count(row_key(x, f)) != 0);
    const std::vector<double> y = teacher.outputs_for(x, gen);
    if (classes) {
      int best = 0;
      for (int c = 1; c < teacher.outputs; ++c) {
        if (y[c] > y[best]) best = c;
      }
      s.labels.push_back(best);
    } else {
      s.targets.push_back(static_cast<float>(y[0]));
    }
  }
  return s;
}

}  // namespace

std::unique_ptr<Dataset> make_synthetic_dataset(const DataSpec& spec, Split split) {
  BRAID_CHECK_ARG(spec.num_samples >= 1, "synthetic data: data.num_samples is {}, must be at least 1",
                  spec.num_samples);
  BRAID_CHECK_ARG(spec.num_features >= 1, "synthetic data: data.num_features is {}, must be at least 1",
                  spec.num_features);
  BRAID_CHECK_ARG(spec.num_classes == 0 || spec.num_classes >= 2,
                  "synthetic data: data.num_classes is {}, must be 0 (regression) or at least 2",
                  spec.num_classes);
  BRAID_CHECK_ARG(spec.num_samples <= kMaxElements / spec.num_features,
                  "synthetic data: data.num_samples {} x data.num_features {} is more than {} values",
                  spec.num_samples, spec.num_features, kMaxElements);

  const bool classes = spec.num_classes > 0;
  const Teacher teacher(spec.seed, classes ? spec.num_classes : 1, spec.num_features);
  Samples train = draw(teacher, spec.seed, kTrainStream, spec.num_samples, classes, nullptr);
  Samples samples;
  if (split == Split::Train) {
    samples = std::move(train);
  } else {
    std::unordered_set<std::string> seen;
    for (int64_t i = 0; i < spec.num_samples; ++i) {
      seen.insert(row_key(train.features.data() + static_cast<size_t>(i) * spec.num_features, spec.num_features));
    }
    samples = draw(teacher, spec.seed, kTestStream, std::max<int64_t>(1, spec.num_samples / 4), classes, &seen);
  }

  const auto n = static_cast<int64_t>(samples.features.size()) / spec.num_features;
  Tensor features = from_vector(samples.features, {n, spec.num_features});
  if (spec.feature_scale != 1.0) features.mul_(spec.feature_scale);
  Tensor targets = classes ? from_vector(samples.labels, {n}) : from_vector(samples.targets, {n, 1});
  const std::string origin = split == Split::Train ? "synthetic data (train split)" : "synthetic data (test split)";
  return std::make_unique<TabularDataset>(std::move(features), std::move(targets), spec.num_classes, origin);
}

}  // namespace braid::runtime::data
