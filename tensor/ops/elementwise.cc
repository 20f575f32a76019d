// Front ends of the elementwise ops: argument checks, PyTorch's result-dtype rules, broadcasting, output
// allocation, in-place/alias handling and the CPU/CUDA split. The arithmetic itself lives in
// elementwise_kernels_cpu.cc and cuda/kernels.h.
#include "tensor/ops/elementwise.h"

#include <cmath>
#include <string>

#include "tensor/cuda/kernels.h"
#include "tensor/factory.h"
#include "tensor/loop.h"
#include "tensor/ops/elementwise_kernels_cpu.h"
#include "tensor/ops/elementwise_plan.h"

namespace braid {
namespace {

using elementwise_plan::can_cast;
using elementwise_plan::check_alpha;
using elementwise_plan::Plan;
using elementwise_plan::plan_binary;
using elementwise_plan::scalar_dtype;
using elementwise_plan::Who;


void check_pow_exponent(BinaryOp op, DType compute, const Scalar& exponent, const Who& who) {
  BRAID_CHECK_ARG(op != BinaryOp::Pow || is_floating(compute) || !exponent.is_integral() || exponent.to_int() >= 0,
                  "pow: Integers to negative integer powers are not allowed. ({})", who.str());
}

void check_defined(std::string_view op, const Tensor& t) {
  BRAID_CHECK_ARG(t.defined(), "{}: an operand is an undefined tensor", op);
}

void check_same_device(std::string_view op, const Tensor& a, const Tensor& b) {
  BRAID_CHECK_ARG(a.device() == b.device(),
                  "{}: Expected all tensors to be on the same device, but found at least two devices, {} and {}! "
                  "(operands {} and {})",
                  op, a.device(), b.device(), a.describe(), b.describe());
}

void check_cast(std::string_view op, DType result, const Tensor& self, const Who& who) {
  BRAID_CHECK_ARG(can_cast(result, self.dtype()), "{}_: result type {} can't be cast to the desired output type {} ({})",
                  op, torch_type_name(result), torch_type_name(self.dtype()), who.str());
}

// Writing through a zero stride would make several results race for one element.
void check_no_internal_overlap(std::string_view op, const Tensor& out) {
  for (int64_t d = 0; d < out.dim(); ++d) {
    BRAID_CHECK_ARG(out.shape()[d] <= 1 || out.strides()[d] != 0,
                    "{}: unsupported operation: more than one element of the written-to tensor {} refers to a "
                    "single memory location. Please clone() the tensor before performing the operation.",
                    op, out.describe());
  }
}

// An input sharing memory with the output in another layout would be overwritten while still being read;
// a private copy breaks the dependency. The identical layout (a.add_(a)) is safe elementwise.
Tensor unalias(const Tensor& in, const Tensor& out) {
  if (!in.shares_storage_with(out)) return in;
  if (in.storage_offset() == out.storage_offset() && in.shape() == out.shape() && in.strides() == out.strides() &&
      in.dtype() == out.dtype()) {
    return in;
  }
  return in.clone();
}

// out <- op(a, b) with a and b converted to `compute`.
void run_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, DType compute, Scalar alpha) {
  if (out.numel() == 0) return;
  const Tensor ac = a.to(compute);
  const Tensor bc = b.to(compute);
  if (out.is_cuda()) {
    cuda::binary(op, out, ac.expand(out.shape()), bc.expand(out.shape()), alpha);
    return;
  }
  detail::cpu_binary(op, out, ac, bc, alpha);
}

void run_binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, Scalar b, DType compute) {
  if (out.numel() == 0) return;
  // PyTorch keeps a scalar operand of 16-bit float arithmetic in float (the op's math type), so that
  // x * 0.1 or x + 2049 round once; comparisons and the rest see it converted to the tensor's dtype.
  const bool arithmetic = op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul || op == BinaryOp::Div ||
                          op == BinaryOp::Pow;
  const bool reduced = compute == DType::Float16 || compute == DType::BFloat16;
  const DType hold = arithmetic && reduced ? DType::Float32 : compute;
  if (out.is_cuda()) {
    // The CUDA kernels take one dtype for both operands: do such ops in float32 and round once on the copy.
    const Tensor bt = scalar_tensor(b, TensorOptions(hold, out.device()));
    if (hold == compute) {
      cuda::binary(op, out, a.to(compute).expand(out.shape()), bt.expand(out.shape()), 1);
    } else {
      const Tensor wide = Tensor::empty(out.shape(), TensorOptions(hold, out.device()));
      cuda::binary(op, wide, a.to(hold).expand(out.shape()), bt.expand(out.shape()), 1);
      out.copy_(wide);
    }
    return;
  }
  detail::cpu_binary(op, out, a.to(compute), scalar_tensor(b, hold), 1);
}

template <class Context>
DType unary_result(UnaryOp op, DType a, const Context& who) {
  BRAID_CHECK_ARG(!is_complex(a) || op == UnaryOp::Neg, "{}: not implemented for '{}' ({})", op_name(op),
                  torch_type_name(a), who.str());
  switch (op) {
    case UnaryOp::Neg:
      BRAID_CHECK_ARG(a != DType::Bool,
                      "neg: Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                      "invert a mask, use the `~` or `logical_not()` operator instead. ({})",
                      who.str());
      return a;
    case UnaryOp::Exp:
    case UnaryOp::Log:
    case UnaryOp::Sqrt:
    case UnaryOp::Tanh:
    case UnaryOp::Sigmoid:
    case UnaryOp::Erf:
      return is_floating(a) ? a : DType::Float32;
    case UnaryOp::Relu:
      BRAID_CHECK_ARG(a != DType::Bool, "relu: Boolean inputs not supported for relu ({})", who.str());
      return a;
    case UnaryOp::LogicalNot:
      return DType::Bool;
    default:
      return a;
  }
}

void run_unary(UnaryOp op, const Tensor& out, const Tensor& a) {
  if (out.numel() == 0) return;
  // logical_not reads any dtype on the CPU; the CUDA kernel wants matching dtypes, so it gets bools.
  const Tensor ac = op == UnaryOp::LogicalNot && !out.is_cuda() ? a : a.to(out.dtype());
  if (out.is_cuda()) {
    cuda::unary(op, out, ac);
    return;
  }
  detail::cpu_unary(op, out, ac);
}

DType clamp_result(const Tensor& a, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  check_defined("clamp", a);
  BRAID_CHECK_ARG(min.has_value() || max.has_value(), "clamp: At least one of 'min' or 'max' must not be None");
  // Scalar bounds take part in type promotion (clamp(int tensor, 0.5) is float32), as in PyTorch >= 1.10.
  DType r = a.dtype();
  if (min) r = min->result_dtype_with(r);
  if (max) r = max->result_dtype_with(r);
  BRAID_CHECK_ARG(r != DType::Bool, "clamp: not implemented for 'Bool' (operand {})", a.describe());
  return r;
}

void run_clamp(const Tensor& out, const Tensor& a, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  if (out.numel() == 0) return;
  const Tensor ac = a.to(out.dtype());
  if (!out.is_cuda()) {
    detail::cpu_clamp(out, ac, min, max);
    return;
  }
  // On CUDA clamp is maximum then minimum; their NaN propagation gives clamp's (NaN bounds give NaN).
  const Tensor* src = &ac;
  if (min) {
    const Tensor lo = scalar_tensor(*min, TensorOptions(out.dtype(), out.device()));
    cuda::binary(BinaryOp::Maximum, out, ac, lo.expand(out.shape()), 1);
    src = &out;
  }
  if (max) {
    const Tensor hi = scalar_tensor(*max, TensorOptions(out.dtype(), out.device()));
    cuda::binary(BinaryOp::Minimum, out, *src, hi.expand(out.shape()), 1);
  }
}

}  // namespace

DType binary_result_dtype(BinaryOp op, DType a, DType b) {
  struct DTypes {
    DType a, b;
    std::string str() const { return fmt::format("dtypes {} and {}", a, b); }
  };
  return plan_binary(op, a, b, promote_types(a, b), DTypes{a, b}).result;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha) {
  const auto name = op_name(op);
  check_defined(name, a);
  check_defined(name, b);
  const Who who{&a, &b, nullptr};
  check_same_device(name, a, b);
  const Plan p = plan_binary(op, a.dtype(), b.dtype(), promote_types(a.dtype(), b.dtype()), who);
  check_alpha(op, p.result, alpha, who);
  const Shape shape = detail::broadcast_shapes(a.shape(), b.shape(), name.data(), &a, &b);
  Tensor out = Tensor::empty(shape, TensorOptions(p.result, a.device()));
  run_binary(op, out, a, b, p.compute, alpha);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, Scalar b) {
  check_defined(op_name(op), a);
  const Who who{&a, nullptr, &b};
  const Plan p = plan_binary(op, a.dtype(), scalar_dtype(b), b.result_dtype_with(a.dtype()), who);
  check_pow_exponent(op, p.compute, b, who);
  Tensor out = Tensor::empty(a.shape(), TensorOptions(p.result, a.device()));
  run_binary_scalar(op, out, a, b, p.compute);
  return out;
}

const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other, Scalar alpha) {
  const auto name = op_name(op);
  check_defined(name, self);
  check_defined(name, other);
  const Who who{&self, &other, nullptr};
  check_same_device(name, self, other);
  const Plan p = plan_binary(op, self.dtype(), other.dtype(), promote_types(self.dtype(), other.dtype()), who);
  check_alpha(op, p.result, alpha, who);
  check_cast(name, p.result, self, who);
  const Shape shape = detail::broadcast_shapes(self.shape(), other.shape(), name.data(), &self, &other);
  BRAID_CHECK_ARG(shape == self.shape(), "{}_: output with shape {} doesn't match the broadcast shape {} ({})", name,
                  shape_str(self.shape()), shape_str(shape), who.str());
  check_no_internal_overlap(name, self);
  const Tensor src = unalias(other, self);
  if (p.result == self.dtype()) {
    self.bump_version();
    run_binary(op, self, self, src, p.compute, alpha);
  } else {
    const Tensor tmp = Tensor::empty(shape, TensorOptions(p.result, self.device()));
    run_binary(op, tmp, self, src, p.compute, alpha);
    self.copy_(tmp);  // bumps the version
  }
  return self;
}

const Tensor& binary_(BinaryOp op, const Tensor& self, Scalar other) {
  const auto name = op_name(op);
  check_defined(name, self);
  const Who who{&self, nullptr, &other};
  const Plan p = plan_binary(op, self.dtype(), scalar_dtype(other), other.result_dtype_with(self.dtype()), who);
  check_pow_exponent(op, p.compute, other, who);
  check_cast(name, p.result, self, who);
  check_no_internal_overlap(name, self);
  if (p.result == self.dtype()) {
    self.bump_version();
    run_binary_scalar(op, self, self, other, p.compute);
  } else {
    const Tensor tmp = Tensor::empty(self.shape(), TensorOptions(p.result, self.device()));
    run_binary_scalar(op, tmp, self, other, p.compute);
    self.copy_(tmp);
  }
  return self;
}

const Tensor& binary_out(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  const auto name = op_name(op);
  check_defined(name, out);
  check_defined(name, a);
  check_defined(name, b);
  const Who who{&a, &b, nullptr};
  check_same_device(name, a, b);
  check_same_device(name, out, a);
  const Plan p = plan_binary(op, a.dtype(), b.dtype(), promote_types(a.dtype(), b.dtype()), who);
  check_alpha(op, p.result, alpha, who);
  const Shape shape = detail::broadcast_shapes(a.shape(), b.shape(), name.data(), &a, &b);
  BRAID_CHECK_ARG(out.shape() == shape, "{}_out: output {} does not have the broadcast shape {} ({})", name,
                  out.describe(), shape_str(shape), who.str());
  BRAID_CHECK_ARG(out.dtype() == p.result, "{}_out: output {} does not have the result dtype {} ({})", name,
                  out.describe(), p.result, who.str());
  check_no_internal_overlap(name, out);
  out.bump_version();
  run_binary(op, out, unalias(a, out), unalias(b, out), p.compute, alpha);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& a) {
  check_defined(op_name(op), a);
  const DType r = unary_result(op, a.dtype(), Who{&a});
  Tensor out = Tensor::empty(a.shape(), TensorOptions(r, a.device()));
  run_unary(op, out, a);
  return out;
}

const Tensor& unary_(UnaryOp op, const Tensor& self) {
  const auto name = op_name(op);
  check_defined(name, self);
  const Who who{&self};
  const DType r = unary_result(op, self.dtype(), who);
  check_cast(name, r, self, who);
  check_no_internal_overlap(name, self);
  if (r == self.dtype()) {
    self.bump_version();
    run_unary(op, self, self);
  } else {
    const Tensor tmp = Tensor::empty(self.shape(), TensorOptions(r, self.device()));
    run_unary(op, tmp, self);
    self.copy_(tmp);
  }
  return self;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond);
  check_defined("where", a);
  check_defined("where", b);
  BRAID_CHECK_ARG(cond.dtype() == DType::Bool,
                  "where: expected condition to be a boolean tensor, but got a tensor with dtype {} (condition {}, "
                  "operands {} and {})",
                  cond.dtype(), cond.describe(), a.describe(), b.describe());
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  const Shape ab = detail::broadcast_shapes(a.shape(), b.shape(), "where", &a, &b);
  const Shape shape = detail::broadcast_shapes(cond.shape(), ab, "where", &cond);
  const DType r = promote_types(a.dtype(), b.dtype());
  Tensor out = Tensor::empty(shape, TensorOptions(r, a.device()));
  if (out.numel() == 0) return out;
  const Tensor ac = a.to(r);
  const Tensor bc = b.to(r);
  if (out.is_cuda()) {
    cuda::where(out, cond.expand(shape), ac.expand(shape), bc.expand(shape));
  } else {
    detail::cpu_where(out, cond, ac, bc);
  }
  return out;
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  const DType r = clamp_result(a, min, max);
  Tensor out = Tensor::empty(a.shape(), TensorOptions(r, a.device()));
  run_clamp(out, a, min, max);
  return out;
}

const Tensor& clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  const DType r = clamp_result(self, min, max);
  BRAID_CHECK_ARG(r == self.dtype(), "clamp_: result type {} can't be cast to the desired output type {} (operand {})",
                  torch_type_name(r), torch_type_name(self.dtype()), self.describe());
  check_no_internal_overlap("clamp_", self);
  self.bump_version();
  run_clamp(self, self, min, max);
  return self;
}

// --- named forms

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return binary(BinaryOp::Add, a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return binary(BinaryOp::Sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor add(const Tensor& a, Scalar b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, Scalar b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, Scalar b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, Scalar b) { return binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, Scalar exponent) { return binary(BinaryOp::Pow, a, exponent); }
Tensor pow(const Tensor& a, const Tensor& exponent) { return binary(BinaryOp::Pow, a, exponent); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, Scalar b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, Scalar b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, Scalar b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, Scalar b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, Scalar b) { return binary(BinaryOp::Ge, a, b); }

Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(BinaryOp::LogicalOr, a, b); }
Tensor logical_not(const Tensor& a) { return unary(UnaryOp::LogicalNot, a); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return binary(BinaryOp::BitwiseAnd, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return binary(BinaryOp::BitwiseOr, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return binary(BinaryOp::BitwiseXor, a, b); }

Tensor neg(const Tensor& a) { return unary(UnaryOp::Neg, a); }
Tensor exp(const Tensor& a) { return unary(UnaryOp::Exp, a); }
Tensor log(const Tensor& a) { return unary(UnaryOp::Log, a); }
Tensor sqrt(const Tensor& a) { return unary(UnaryOp::Sqrt, a); }
Tensor tanh(const Tensor& a) { return unary(UnaryOp::Tanh, a); }
Tensor erf(const Tensor& a) { return unary(UnaryOp::Erf, a); }
Tensor sigmoid(const Tensor& a) { return unary(UnaryOp::Sigmoid, a); }
Tensor relu(const Tensor& a) { return unary(UnaryOp::Relu, a); }
Tensor abs(const Tensor& a) { return unary(UnaryOp::Abs, a); }
Tensor sign(const Tensor& a) { return unary(UnaryOp::Sign, a); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }

// --- Tensor members (declared in tensor.h)

Tensor Tensor::add(const Tensor& other, Scalar alpha) const { return binary(BinaryOp::Add, *this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, Scalar alpha) const { return binary(BinaryOp::Sub, *this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return binary(BinaryOp::Mul, *this, other); }
Tensor Tensor::div(const Tensor& other) const { return binary(BinaryOp::Div, *this, other); }
const Tensor& Tensor::add_(const Tensor& other, Scalar alpha) const {
  return binary_(BinaryOp::Add, *this, other, alpha);
}
const Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) const {
  return binary_(BinaryOp::Sub, *this, other, alpha);
}
const Tensor& Tensor::mul_(const Tensor& other) const { return binary_(BinaryOp::Mul, *this, other); }
const Tensor& Tensor::div_(const Tensor& other) const { return binary_(BinaryOp::Div, *this, other); }
const Tensor& Tensor::add_(Scalar other) const { return binary_(BinaryOp::Add, *this, other); }
const Tensor& Tensor::mul_(Scalar other) const { return binary_(BinaryOp::Mul, *this, other); }

}  // namespace braid
