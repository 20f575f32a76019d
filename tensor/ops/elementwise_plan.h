// The elementwise front ends' typing rules (tensor/ops/elementwise.cc): PyTorch's result and compute dtypes
// of each binary op, its canCast rule for in-place results, and the error context naming the operands.
#pragma once

#include <fmt/format.h>

#include <string>

#include "base/check.h"
#include "tensor/ops/op_kinds.h"
#include "tensor/tensor.h"

namespace braid::elementwise_plan {

// PyTorch's canCast: in-place results may not go from floating to integral, nor from non-bool to bool.
inline bool can_cast(DType from, DType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && !is_floating(to) && !is_complex(to)) return false;
  return from == DType::Bool || to != DType::Bool;
}

inline std::string scalar_str(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return s.to_int() != 0 ? "True" : "False";
    case Scalar::Kind::Int: return std::to_string(s.to_int());
    case Scalar::Kind::Double: return fmt::format("{}", s.to_double());
  }
  return "?";
}

// The dtype a scalar has on its own; only the operand checks (sub on bool) look at it.
inline DType scalar_dtype(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return DType::Bool;
    case Scalar::Kind::Int: return DType::Int64;
    case Scalar::Kind::Double: return DType::Float64;
  }
  return DType::Float64;
}

// Error context naming both operands. Formatting shapes costs more than many small ops, so the text is
// only built when an error is actually thrown.
struct Who {
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  const Scalar* s = nullptr;
  std::string str() const {
    if (b != nullptr) return fmt::format("operands {} and {}", a->describe(), b->describe());
    if (s != nullptr) return fmt::format("operands {} and scalar {}", a->describe(), scalar_str(*s));
    return fmt::format("operand {}", a->describe());
  }
};

struct Plan {
  DType compute;  // dtype the inputs are converted to and the kernel computes in
  DType result;   // dtype of the output
};

// Complex operands: the field operations and equality (what the collectives' reductions and the optimizers
// need); ordering, powers and bit operations are refused as in torch.
template <class Context>
Plan plan_complex_binary(BinaryOp op, DType promoted, const Context& who) {
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul:
    case BinaryOp::Div: return {promoted, promoted};
    case BinaryOp::Eq:
    case BinaryOp::Ne: return {promoted, DType::Bool};
    default:
      BRAID_THROW(InvalidArgument, "{}: not implemented for '{}' ({})", op_name(op), torch_type_name(promoted),
                  who.str());
  }
}

template <class Context>
Plan plan_binary(BinaryOp op, DType a, DType b, DType promoted, const Context& who) {
  const auto name = op_name(op);
  if (is_complex(promoted)) return plan_complex_binary(op, promoted, who);
  switch (op) {
    case BinaryOp::Sub:
      BRAID_CHECK_ARG(a != DType::Bool || b != DType::Bool,
                      "{}: Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
                      "or `logical_xor()` operator instead. ({})",
                      name, who.str());
      BRAID_CHECK_ARG(a != DType::Bool && b != DType::Bool,
                      "{}: Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                      "to invert a mask, use the `~` or `logical_not()` operator instead. ({})",
                      name, who.str());
      return {promoted, promoted};
    case BinaryOp::Div: {
      const DType r = is_floating(promoted) ? promoted : DType::Float32;
      return {r, r};
    }
    case BinaryOp::Pow:
      BRAID_CHECK_ARG(promoted != DType::Bool, "{}: not implemented for 'Bool' ({})", name, who.str());
      return {promoted, promoted};
    case BinaryOp::Eq:
    case BinaryOp::Ne:
    case BinaryOp::Lt:
    case BinaryOp::Le:
    case BinaryOp::Gt:
    case BinaryOp::Ge:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
      return {promoted, DType::Bool};
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
      BRAID_CHECK_ARG(is_integral(promoted, /*include_bool=*/true),
                      "{}: not implemented for dtype {}; bitwise ops need integral or bool operands ({})", name,
                      promoted, who.str());
      return {promoted, promoted};
    default:
      return {promoted, promoted};
  }
}

template <class Context>
void check_alpha(BinaryOp op, DType result, const Scalar& alpha, const Context& who) {
  if (op != BinaryOp::Add && op != BinaryOp::Sub) return;
  BRAID_CHECK_ARG(alpha.kind() != Scalar::Kind::Bool || result == DType::Bool,
                  "{}: Boolean alpha only supported for Boolean results ({})", op_name(op), who.str());
  BRAID_CHECK_ARG(is_floating(result) || is_complex(result) || alpha.is_integral(),
                  "{}: For integral input tensors, argument alpha must not be a floating point number. ({})",
                  op_name(op), who.str());
}

}  // namespace braid::elementwise_plan
