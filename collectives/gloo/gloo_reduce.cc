#include "collectives/gloo/gloo_reduce.h"

#include <gloo/math.h>

#include <complex>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "base/check.h"

namespace braid::collectives::gloo {

namespace {

// gloo::sum<T> and friends are overloaded ((void*, const void*, const void*, size_t) and (T*, const T*,
// size_t)); the cast picks the form the algorithms take.
template <class T>
ReduceFn gloo_fn(void (*f)(void*, const void*, const void*, size_t)) {
  return f;
}

template <class T, class Op>
void bitwise(void* out, const void* in1, const void* in2, size_t count) {
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(in1);
  const T* b = static_cast<const T*>(in2);
  for (size_t i = 0; i < count; ++i) o[i] = static_cast<T>(Op{}(a[i], b[i]));
}

// Integer sums and products wrap, as torch's. gloo's templates compute a[i] * b[i] in T, which is
// undefined behaviour on signed overflow (int64 products of the overflow tests hit it; UBSan reports
// it), so integers go through the unsigned type of the same width, where wrapping is defined.
template <class T, class Op>
void wrapping(void* out, const void* in1, const void* in2, size_t count) {
  using U = std::make_unsigned_t<T>;
  // Unsigned types narrower than int would promote to (signed) int again: widen them to unsigned int.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(in1);
  const T* b = static_cast<const T*>(in2);
  for (size_t i = 0; i < count; ++i) {
    const W x = static_cast<U>(a[i]);
    const W y = static_cast<U>(b[i]);
    o[i] = static_cast<T>(static_cast<U>(Op{}(x, y)));
  }
}

// Complex elements reach the engines only for PRODUCT (sums travel as their real parts: ProcessGroup views
// complex tensors as real for every other op), but SUM is as cheap to offer.
template <class C, class Op>
void complex_elementwise(void* out, const void* in1, const void* in2, size_t count) {
  C* o = static_cast<C*>(out);
  const C* a = static_cast<const C*>(in1);
  const C* b = static_cast<const C*>(in2);
  for (size_t i = 0; i < count; ++i) o[i] = Op{}(a[i], b[i]);
}

template <class C>
ReduceFn complex_function_for(EngineOp op) {
  if (op == EngineOp::SUM) return &complex_elementwise<C, std::plus<>>;
  if (op == EngineOp::PRODUCT) return &complex_elementwise<C, std::multiplies<>>;
  return nullptr;
}

template <class T>
ReduceFn function_for(EngineOp op) {
  switch (op) {
    case EngineOp::SUM:
      if constexpr (std::is_integral_v<T>) return &wrapping<T, std::plus<>>;
      return gloo_fn<T>(&::gloo::sum<T>);
    case EngineOp::PRODUCT:
      if constexpr (std::is_integral_v<T>) return &wrapping<T, std::multiplies<>>;
      return gloo_fn<T>(&::gloo::product<T>);
    case EngineOp::MIN: return gloo_fn<T>(&::gloo::min<T>);
    case EngineOp::MAX: return gloo_fn<T>(&::gloo::max<T>);
    case EngineOp::BAND:
    case EngineOp::BOR:
    case EngineOp::BXOR:
      if constexpr (std::is_integral_v<T>) {
        if (op == EngineOp::BAND) return &bitwise<T, std::bit_and<>>;
        if (op == EngineOp::BOR) return &bitwise<T, std::bit_or<>>;
        return &bitwise<T, std::bit_xor<>>;
      }
      break;
  }
  return nullptr;
}

}  // namespace

bool reduces_natively(DType dtype) {
  switch (dtype) {
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64:
    case DType::Float32:
    case DType::Float64:
    case DType::Complex64:
    case DType::Complex128: return true;
    default: return false;
  }
}

ReduceFn reduce_function(DType dtype, EngineOp op) {
  ReduceFn fn = nullptr;
  switch (dtype) {
    case DType::UInt8: fn = function_for<uint8_t>(op); break;
    case DType::Int8: fn = function_for<int8_t>(op); break;
    case DType::Int32: fn = function_for<int32_t>(op); break;
    case DType::Int64: fn = function_for<int64_t>(op); break;
    case DType::Float32: fn = function_for<float>(op); break;
    case DType::Float64: fn = function_for<double>(op); break;
    case DType::Complex64: fn = complex_function_for<std::complex<float>>(op); break;
    case DType::Complex128: fn = complex_function_for<std::complex<double>>(op); break;
    default: break;
  }
  BRAID_CHECK_ARG(fn != nullptr, "gloo: unsupported reduction operation {} for dtype {}", engine_op_name(op), dtype);
  return fn;
}

}  // namespace braid::collectives::gloo
