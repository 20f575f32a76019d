// Runs a generic lambda with the C++ element type of a runtime dtype:
//   dispatch(t.dtype(), "sum", [&]<class T>() { ... T* p = t.data<T>(); ... });
// The op name is used in the error for a dtype the caller's variant does not support.
//
// dispatch() covers the real dtypes only: a complex dtype gets torch's '"op" not implemented for
// 'ComplexFloat'' error. Ops that handle complex numbers opt in with dispatch_with_complex().
#pragma once

#include <utility>

#include "base/check.h"
#include "tensor/dtype.h"

namespace braid {

template <class F>
decltype(auto) dispatch(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Bool: return std::forward<F>(f).template operator()<bool>();
    case DType::UInt8: return std::forward<F>(f).template operator()<uint8_t>();
    case DType::Int8: return std::forward<F>(f).template operator()<int8_t>();
    case DType::Int32: return std::forward<F>(f).template operator()<int32_t>();
    case DType::Int64: return std::forward<F>(f).template operator()<int64_t>();
    case DType::Float16: return std::forward<F>(f).template operator()<Half>();
    case DType::BFloat16: return std::forward<F>(f).template operator()<BFloat16>();
    case DType::Float32: return std::forward<F>(f).template operator()<float>();
    case DType::Float64: return std::forward<F>(f).template operator()<double>();
    case DType::Complex64:
    case DType::Complex128:
      BRAID_THROW(InvalidArgument, "\"{}\" not implemented for '{}'", op, torch_type_name(dtype));
  }
  BRAID_THROW(InternalError, "{}: corrupt dtype value {}", op, static_cast<int>(dtype));
}

// dispatch() plus the complex dtypes (std::complex<float>, std::complex<double>).
template <class F>
decltype(auto) dispatch_with_complex(DType dtype, const char* op, F&& f) {
  if (dtype == DType::Complex64) return std::forward<F>(f).template operator()<std::complex<float>>();
  if (dtype == DType::Complex128) return std::forward<F>(f).template operator()<std::complex<double>>();
  return dispatch(dtype, op, std::forward<F>(f));
}

// Same, for ops defined only on floating dtypes; others get an InvalidArgument naming the op.
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float16: return std::forward<F>(f).template operator()<Half>();
    case DType::BFloat16: return std::forward<F>(f).template operator()<BFloat16>();
    case DType::Float32: return std::forward<F>(f).template operator()<float>();
    case DType::Float64: return std::forward<F>(f).template operator()<double>();
    default: break;
  }
  BRAID_THROW(InvalidArgument, "{}: expected a floating-point tensor, got dtype {}", op, dtype);
}

}  // namespace braid
