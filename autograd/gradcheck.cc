#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

namespace braid::autograd {
namespace {

// Pointer to element `flat` (row-major logical index) of a float64 tensor with any strides.
double* element(const Tensor& t, int64_t flat) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t size = t.shape()[d];
    offset += (flat % size) * t.strides()[d];
    flat /= size;
  }
  return static_cast<double*>(t.data_ptr()) + offset;
}

std::vector<double> evaluate(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return to_vector<double>(fn(inputs));
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions options) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRAID_CHECK_ARG(inputs[i].dtype() == DType::Float64 && inputs[i].device().is_cpu(),
                    "gradcheck: input {} must be a float64 CPU tensor, got {}", i, inputs[i].describe());
    BRAID_CHECK_ARG(requires_grad(inputs[i]) && is_leaf(inputs[i]),
                    "gradcheck: input {} must be a leaf that requires grad", i);
  }
  const Tensor out = fn(inputs);
  BRAID_CHECK_ARG(requires_grad(out), "gradcheck: the output does not require grad (no input reaches it)");
  const int64_t n_out = out.numel();

  // Analytical Jacobian, one output element (row) at a time.
  std::vector<std::vector<std::vector<double>>> analytical(inputs.size());  // [input][out][in]
  for (int64_t o = 0; o < n_out; ++o) {
    std::vector<double> onehot(static_cast<size_t>(n_out), 0.0);
    onehot[static_cast<size_t>(o)] = 1.0;
    const Tensor grad_out = from_vector(onehot, out.shape().empty() ? Shape{} : out.shape()).to(out.dtype());
    TensorList g = grad({out}, inputs, {grad_out.reshape(out.shape())}, /*retain_graph=*/true, /*allow_unused=*/true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      // A sparse gradient (embedding_bag with sparse=true) is compared through its dense values.
      analytical[i].push_back(g[i].defined() ? to_vector<double>(g[i].is_sparse() ? as_sparse(g[i]).to_dense() : g[i])
                                             : std::vector<double>(static_cast<size_t>(inputs[i].numel()), 0.0));
    }
  }

  // Numerical Jacobian, one input element (column) at a time.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    for (int64_t k = 0; k < x.numel(); ++k) {
      double* p = element(x, k);
      const double orig = *p;
      *p = orig + options.eps;
      const auto plus = evaluate(fn, inputs);
      *p = orig - options.eps;
      const auto minus = evaluate(fn, inputs);
      *p = orig;
      for (int64_t o = 0; o < n_out; ++o) {
        const double numerical = (plus[o] - minus[o]) / (2 * options.eps);
        const double a = analytical[i][static_cast<size_t>(o)][static_cast<size_t>(k)];
        if (!(std::abs(a - numerical) <= options.atol + options.rtol * std::abs(numerical))) {
          return {false, fmt::format("gradcheck: Jacobian mismatch for output {} with respect to input {} element "
                                     "{}: analytical {} vs numerical {}",
                                     o, i, k, a, numerical)};
        }
      }
    }
  }
  return {};
}

}  // namespace braid::autograd
