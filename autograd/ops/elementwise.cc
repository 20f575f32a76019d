#include "autograd/ops/elementwise.h"

#include <cmath>

#include "autograd/ops/op_helpers.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"

namespace braid::autograd {

using detail::record;
using detail::sum_to;

namespace {
// Gradient of a unary op from its output gradient and a local derivative.
Tensor unary_record(const char* name, const Tensor& a, const Tensor& out, std::vector<SavedTensor> saved,
                    std::function<Tensor(const Tensor& grad, SavedTensors& saved)> rule) {
  return record(name, {a}, out, std::move(saved),
                [rule = std::move(rule)](const TensorList& g, SavedTensors& s) -> TensorList {
                  return {rule(g[0], s)};
                });
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return record("AddBackward", {a, b}, braid::add(a, b, alpha), {},
                [sa = a.shape(), sb = b.shape(), alpha](const TensorList& g, SavedTensors&) {
                  return TensorList{sum_to(g[0], sa), sum_to(braid::mul(g[0], alpha), sb)};
                });
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  return record("SubBackward", {a, b}, braid::sub(a, b, alpha), {},
                [sa = a.shape(), sb = b.shape(), alpha](const TensorList& g, SavedTensors&) {
                  return TensorList{sum_to(g[0], sa), sum_to(braid::mul(g[0], -alpha.to_double()), sb)};
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const auto needs = detail::needs_grad({a, b});
  return record("MulBackward", {a, b}, braid::mul(a, b),
                {SavedTensor(needs[1] ? a : Tensor(), "MulBackward"), SavedTensor(needs[0] ? b : Tensor(), "MulBackward")},
                [sa = a.shape(), sb = b.shape(), needs](const TensorList& g, SavedTensors& s) {
                  return TensorList{needs[0] ? sum_to(braid::mul(g[0], s[1].unpack()), sa) : Tensor(),
                                    needs[1] ? sum_to(braid::mul(g[0], s[0].unpack()), sb) : Tensor()};
                });
}

Tensor div(const Tensor& a, const Tensor& b) {
  const auto needs = detail::needs_grad({a, b});
  return record("DivBackward", {a, b}, braid::div(a, b),
                {SavedTensor(needs[1] ? a : Tensor(), "DivBackward"), SavedTensor(b, "DivBackward")},
                [sa = a.shape(), sb = b.shape(), needs](const TensorList& g, SavedTensors& s) {
                  const Tensor& bv = s[1].unpack();
                  Tensor ga, gb;
                  if (needs[0]) ga = sum_to(braid::div(g[0], bv), sa);
                  if (needs[1]) gb = sum_to(braid::neg(braid::div(braid::mul(g[0], s[0].unpack()), braid::mul(bv, bv))), sb);
                  return TensorList{ga, gb};
                });
}

Tensor add(const Tensor& a, Scalar b) {
  return unary_record("AddBackward", a, braid::add(a, b), {},
                      [](const Tensor& g, SavedTensors&) { return g; });
}

Tensor mul(const Tensor& a, Scalar b) {
  return unary_record("MulBackward", a, braid::mul(a, b), {},
                      [b](const Tensor& g, SavedTensors&) { return braid::mul(g, b); });
}

Tensor div(const Tensor& a, Scalar b) {
  return unary_record("DivBackward", a, braid::div(a, b), {},
                      [b](const Tensor& g, SavedTensors&) { return braid::div(g, b); });
}

Tensor neg(const Tensor& a) {
  return unary_record("NegBackward", a, braid::neg(a), {},
                      [](const Tensor& g, SavedTensors&) { return braid::neg(g); });
}

Tensor pow(const Tensor& a, Scalar exponent) {
  return unary_record("PowBackward", a, braid::pow(a, exponent), {SavedTensor(a, "PowBackward")},
                      [exponent](const Tensor& g, SavedTensors& s) {
                        const double e = exponent.to_double();
                        if (e == 0.0) return braid::mul(g, 0.0);
                        // d/dx x^e = e * x^(e-1)
                        return braid::mul(braid::mul(g, braid::pow(s[0].unpack(), e - 1.0)), e);
                      });
}

Tensor exp(const Tensor& a) {
  Tensor out = braid::exp(a);
  return unary_record("ExpBackward", a, out, {SavedTensor(out, "ExpBackward")},
                      [](const Tensor& g, SavedTensors& s) { return braid::mul(g, s[0].unpack()); });
}

Tensor log(const Tensor& a) {
  return unary_record("LogBackward", a, braid::log(a), {SavedTensor(a, "LogBackward")},
                      [](const Tensor& g, SavedTensors& s) { return braid::div(g, s[0].unpack()); });
}

Tensor sqrt(const Tensor& a) {
  Tensor out = braid::sqrt(a);
  return unary_record("SqrtBackward", a, out, {SavedTensor(out, "SqrtBackward")},
                      [](const Tensor& g, SavedTensors& s) {
                        return braid::div(g, braid::mul(s[0].unpack(), 2.0));
                      });
}

Tensor abs(const Tensor& a) {
  return unary_record("AbsBackward", a, braid::abs(a), {SavedTensor(a, "AbsBackward")},
                      [](const Tensor& g, SavedTensors& s) {
                        return braid::mul(g, braid::sign(s[0].unpack()));
                      });
}

Tensor relu(const Tensor& a) {
  Tensor out = braid::relu(a);
  return unary_record("ReluBackward", a, out, {SavedTensor(out, "ReluBackward")},
                      [](const Tensor& g, SavedTensors& s) {
                        // The output, not the input, decides: grad flows where relu(x) > 0.
                        return braid::mul(g, braid::gt(s[0].unpack(), 0).to(g.dtype()));
                      });
}

Tensor gelu(const Tensor& a) {
  // gelu(x) = x * Phi(x); Phi(x) = (1 + erf(x / sqrt 2)) / 2, and the density phi(x) for the backward, both
  // in float64 and rounded once to x's dtype: on the CPU in one loop, on CUDA through the erf and exp
  // kernels (the same math on the device).
  const Tensor x = a.to(is_floating(a.dtype()) ? a.dtype() : DType::Float32).contiguous();
  Tensor cdf = empty_like(x);
  Tensor pdf = empty_like(x);
  if (x.is_cuda()) {
    const Tensor x64 = x.to(DType::Float64);
    cdf.copy_(braid::mul(braid::add(braid::erf(braid::div(x64, std::sqrt(2.0))), 1.0), 0.5));
    pdf.copy_(braid::div(braid::exp(braid::mul(braid::mul(x64, x64), -0.5)), std::sqrt(2.0 * M_PI)));
  } else {
    const Tensor x64 = x.to(DType::Float64).contiguous();
    Tensor c64 = Tensor::empty(x.shape(), DType::Float64), p64 = Tensor::empty(x.shape(), DType::Float64);
    const double* xp = x64.data<double>();
    double* cp = c64.data<double>();
    double* pp = p64.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      cp[i] = 0.5 * (1.0 + std::erf(xp[i] / std::sqrt(2.0)));
      pp[i] = std::exp(-0.5 * xp[i] * xp[i]) / std::sqrt(2.0 * M_PI);
    }
    cdf.copy_(c64);
    pdf.copy_(p64);
  }
  Tensor out = braid::mul(x, cdf);
  return unary_record("GeluBackward", a, out, {SavedTensor(x, "GeluBackward"), SavedTensor(cdf, "GeluBackward"),
                                               SavedTensor(pdf, "GeluBackward")},
                      [](const Tensor& g, SavedTensors& s) {
                        // d/dx x Phi(x) = Phi(x) + x phi(x)
                        return braid::mul(g, braid::add(s[1].unpack(), braid::mul(s[0].unpack(), s[2].unpack())));
                      });
}

Tensor sigmoid(const Tensor& a) {
  Tensor out = braid::sigmoid(a);
  return unary_record("SigmoidBackward", a, out, {SavedTensor(out, "SigmoidBackward")},
                      [](const Tensor& g, SavedTensors& s) {
                        const Tensor& y = s[0].unpack();
                        return braid::mul(g, braid::mul(y, braid::sub(ones_like(y), y)));
                      });
}

Tensor tanh(const Tensor& a) {
  Tensor out = braid::tanh(a);
  return unary_record("TanhBackward", a, out, {SavedTensor(out, "TanhBackward")},
                      [](const Tensor& g, SavedTensors& s) {
                        const Tensor& y = s[0].unpack();
                        return braid::mul(g, braid::sub(ones_like(y), braid::mul(y, y)));
                      });
}

}  // namespace braid::autograd
