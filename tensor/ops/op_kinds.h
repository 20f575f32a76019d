// The elementwise and reduction operations, named once so that the CPU and CUDA kernels implement the
// same list and the front ends (ops/*.cc) dispatch by name.
#pragma once

#include <cstdint>
#include <string_view>

namespace braid {

enum class BinaryOp : uint8_t {
  Add,  // a + alpha * b
  Sub,  // a - alpha * b
  Mul,
  Div,  // true division (integers are promoted to float first by the front end)
  Pow,
  Maximum,
  Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,  // output bool
  LogicalAnd, LogicalOr,   // output bool
  BitwiseAnd, BitwiseOr, BitwiseXor,  // integral and bool only
};

enum class UnaryOp : uint8_t {
  Neg, Exp, Log, Sqrt, Tanh, Sigmoid, Relu, Abs, Sign, LogicalNot, Erf,
};

enum class ReduceKind : uint8_t { Sum, Prod, Max, Min, NormP, All, Any };

std::string_view op_name(BinaryOp op);
std::string_view op_name(UnaryOp op);

}  // namespace braid
