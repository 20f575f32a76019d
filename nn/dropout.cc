#include "nn/dropout.h"

#include <fmt/format.h>

#include "autograd/ops/nn_ops.h"
#include "base/check.h"
#include "nn/repr.h"

namespace braid::nn {

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  BRAID_CHECK_ARG(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got {}", p);
}

Tensor Dropout::forward(const Tensor& input) { return autograd::dropout(input, p_, is_training(), gen_); }

std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=False", detail::py_float(p_)); }

}  // namespace braid::nn
