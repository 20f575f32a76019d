// Elementwise arithmetic, comparisons, logic, unary math, where and clamp.
//
// Binary ops broadcast NumPy-style and promote dtypes with promote_types(); a Scalar operand takes the
// tensor's dtype unless Scalar::result_dtype_with() says otherwise. div always produces a floating
// result (integers divide as float32). Comparisons and logical ops produce bool. In-place forms write
// into self: the result dtype must be castable to self's dtype (float into an integer tensor is an error,
// as in PyTorch) and the broadcast shape must equal self's shape; `other` may alias self in any layout.
// Integer arithmetic wraps; float16/bfloat16 arithmetic is done in float and rounded once (a scalar
// operand of +, -, *, /, pow is kept in float, as PyTorch does). Unlike PyTorch, 0-dim tensors promote
// like any other tensor (only Scalars get the wrapped-number rule).
// Errors name the op and both operands' shapes and dtypes.
#pragma once

#include <optional>

#include "tensor/ops/op_kinds.h"
#include "tensor/tensor.h"

namespace braid {

// --- generic entry points (what the named functions below call)
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor binary(BinaryOp op, const Tensor& a, Scalar b);
const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other, Scalar alpha = 1);
const Tensor& binary_(BinaryOp op, const Tensor& self, Scalar other);
// Writes op(a, b) into `out` (shape = broadcast shape, dtype = the op's result dtype); no allocation when
// a and b already have the op's compute dtype and do not overlap `out` in a different layout (an
// overlapping input is copied first; out == a with the same layout is fine).
const Tensor& binary_out(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor unary(UnaryOp op, const Tensor& a);
const Tensor& unary_(UnaryOp op, const Tensor& self);
// The dtype binary(op, a, b) returns.
DType binary_result_dtype(BinaryOp op, DType a, DType b);

// --- arithmetic
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// --- comparisons (bool results)
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);

// --- logic and bits
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);

// --- unary math (exp, log, sqrt, tanh, sigmoid produce floating results: integers become float32)
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor erf(const Tensor& a);  // the error function (floating results, as tanh)
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);

// --- selection
// cond must be bool; a and b broadcast with cond; result dtype promote(a, b).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// At least one bound must be given; throws "clamp: At least one of 'min' or 'max' must not be None".
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
const Tensor& clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);

// --- operators
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a);

}  // namespace braid
