#include "runtime/models/loss.h"

#include <algorithm>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "runtime/models/builtin_models.h"
#include "runtime/models/named_registry.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace braid::runtime {

namespace {

// The job file's names (job_spec.h's to_string lives with the job-file parser).
const char* loss_name(LossKind kind) {
  switch (kind) {
    case LossKind::CrossEntropy: return "cross_entropy";
    case LossKind::Mse: return "mse";
    case LossKind::WeightedSum: return "weighted_sum";
    case LossKind::Registered: break;
  }
  return "a registered loss";
}

bool is_integer(DType d) { return !is_floating(d) && d != DType::Bool; }

std::string shapes(const Tensor& output, const Tensor& target) {
  return fmt::format("output {} and target {}", output.describe(), target.describe());
}

// NumPy/PyTorch broadcasting: align the shapes on the right; each pair of sizes must be equal or one 1.
bool broadcastable(const Shape& a, const Shape& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 1; i <= n; ++i) {
    const int64_t x = a[a.size() - i];
    const int64_t y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// Integer class indices as int64 (what the nll kernel reads).
Tensor class_targets(const char* loss, const Tensor& output, const Tensor& target) {
  BRAID_CHECK_ARG(is_integer(target.dtype()), "{}: the target must hold integer class indices, got {}", loss,
                  shapes(output, target));
  return target.to(DType::Int64);
}

Tensor float_target(const char* loss, const Tensor& output, const Tensor& target) {
  BRAID_CHECK_ARG(is_floating(output.dtype()), "{}: the output must be floating point, got {}", loss,
                  shapes(output, target));
  BRAID_CHECK_ARG(target.dtype() != DType::Bool, "{}: the target must be numeric, got {}", loss, shapes(output, target));
  return target.to(output.dtype());
}

Tensor cross_entropy(const Tensor& output, const Tensor& target) {
  BRAID_CHECK_ARG(output.dim() == 2 && target.dim() == 1 && output.shape()[0] == target.shape()[0],
                  "cross_entropy: expected output [N, C] and target [N], got {}", shapes(output, target));
  BRAID_CHECK_ARG(is_floating(output.dtype()), "cross_entropy: the output must be floating point logits, got {}",
                  shapes(output, target));
  return autograd::cross_entropy(output, class_targets("cross_entropy", output, target), autograd::Reduction::Mean);
}

Tensor mse(const Tensor& output, const Tensor& target) {
  Tensor t = float_target("mse", output, target);
  // A regression head [N, 1] against targets [N]: read the targets as a column, not PyTorch's silent
  // broadcast to [N, N].
  if (output.dim() == 2 && output.shape()[1] == 1 && t.dim() == 1 && t.shape()[0] == output.shape()[0]) {
    t = t.reshape(output.shape());
  }
  BRAID_CHECK_ARG(output.shape() == t.shape(), "mse: expected the same shape, got {}", shapes(output, target));
  return autograd::mse_loss(output, t, autograd::Reduction::Mean);
}

Tensor weighted_sum(const Tensor& output, const Tensor& target) {
  const Tensor t = float_target("weighted_sum", output, target);
  BRAID_CHECK_ARG(broadcastable(output.shape(), t.shape()), "weighted_sum: {} do not broadcast together",
                  shapes(output, target));
  return autograd::sum(autograd::mul(output, t));
}

}  // namespace

Tensor compute_loss(LossKind kind, const Tensor& output, const Tensor& target) {
  BRAID_CHECK_ARG(output.defined() && target.defined(), "{}: needs an output and a target (got {} and {})",
                  loss_name(kind), output.defined() ? "one" : "none", target.defined() ? "one" : "none");
  switch (kind) {
    case LossKind::CrossEntropy: return cross_entropy(output, target);
    case LossKind::Mse: return mse(output, target);
    case LossKind::WeightedSum: return weighted_sum(output, target);
    case LossKind::Registered: break;
  }
  BRAID_THROW(InternalError, "compute_loss: loss kind {} has no built-in computation (a registered loss is "
              "computed through compute_job_loss)", static_cast<int>(kind));
}

namespace {

NamedRegistry<LossDefinition>& losses() {
  // Built-ins are entries too, so that an unknown name lists every loss a job can use.
  static NamedRegistry<LossDefinition> r("loss");
  static const bool builtins_added = [] {
    for (LossKind kind : {LossKind::CrossEntropy, LossKind::Mse, LossKind::WeightedSum}) {
      r.add(loss_name(kind), {loss_name(kind), "built in",
                              [kind](const Tensor& o, const Tensor& t) { return compute_loss(kind, o, t); }});
    }
    return true;
  }();
  (void)builtins_added;
  return r;
}

}  // namespace

void register_loss(LossDefinition definition, std::string origin) {
  BRAID_CHECK_ARG(definition.compute != nullptr, "register_loss: loss '{}' has no compute function", definition.name);
  const std::string name = definition.name;
  losses().add(name, std::move(definition), std::move(origin));
}

const LossDefinition* find_loss(const std::string& name) { return losses().definition(name); }

std::string loss_origin(const std::string& name) { return losses().origin(name); }

void check_loss_known(const std::string& name) {
  if (losses().find(name) != nullptr) return;
  BRAID_THROW(InvalidArgument, "loss: unknown loss '{}'{} (known: {})", name, detail::did_you_mean(name, losses().names()),
              losses().describe_known());
}

Tensor compute_job_loss(const JobSpec& job, const Tensor& output, const Tensor& target) {
  if (job.loss != LossKind::Registered) return compute_loss(job.loss, output, target);
  const auto* e = losses().find(job.loss_name);
  if (e == nullptr) check_loss_known(job.loss_name);
  Tensor loss = e->definition.compute(output, target);
  BRAID_CHECK_ARG(loss.defined() && loss.numel() == 1, "loss '{}'{}: must return a scalar, got {}", job.loss_name,
                  NamedRegistry<LossDefinition>::marked(e->origin), loss.defined() ? loss.describe() : "nothing");
  return loss;
}

double accuracy(const Tensor& output, const Tensor& target) {
  BRAID_CHECK_ARG(output.dim() == 2 && target.dim() == 1 && output.shape()[0] == target.shape()[0],
                  "accuracy: expected output [N, C] and target [N], got {}", shapes(output, target));
  BRAID_CHECK_ARG(output.shape()[0] > 0, "accuracy: the batch is empty ({})", shapes(output, target));
  const Tensor predicted = argmax(autograd::detach(output), 1);
  const Tensor hits = eq(predicted, class_targets("accuracy", output, target));
  const double correct = sum(hits, {}, false, DType::Float64).item<double>();
  return correct / static_cast<double>(output.shape()[0]);
}

}  // namespace braid::runtime
