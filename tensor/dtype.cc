#include "tensor/dtype.h"

#include "base/check.h"

namespace braid {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64:
    case DType::Complex64: return 8;
    case DType::Complex128: return 16;
  }
  BRAID_THROW(InternalError, "element_size: corrupt dtype value {}", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "invalid";
}

std::string_view torch_type_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "Byte";
    case DType::Int8: return "Char";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Complex64: return "ComplexFloat";
    case DType::Complex128: return "ComplexDouble";
  }
  return "Unknown";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : kRealDTypes) {
    if (dtype_name(d) == name) return d;
  }
  for (DType d : kComplexDTypes) {
    if (dtype_name(d) == name) return d;
  }
  if (name == "cfloat") return DType::Complex64;
  if (name == "cdouble") return DType::Complex128;
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  if (name == "half") return DType::Float16;
  if (name == "long") return DType::Int64;
  if (name == "int") return DType::Int32;
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32 ||
         dtype == DType::Float64;
}

bool is_complex(DType dtype) { return dtype == DType::Complex64 || dtype == DType::Complex128; }

DType real_dtype(DType dtype) {
  if (dtype == DType::Complex64) return DType::Float32;
  if (dtype == DType::Complex128) return DType::Float64;
  return dtype;
}

DType complex_dtype(DType dtype) {
  if (is_complex(dtype)) return dtype;
  BRAID_CHECK_ARG(is_floating(dtype), "complex_dtype: no complex dtype has {} parts", dtype);
  return dtype == DType::Float64 ? DType::Complex128 : DType::Complex64;
}

bool is_integral(DType dtype, bool include_bool) {
  switch (dtype) {
    case DType::Bool: return include_bool;
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: return true;
    default: return false;
  }
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_complex(a) || is_complex(b)) {
    // The complex operand's width, widened by a float64 (or complex128) on either side.
    const bool wide = a == DType::Complex128 || b == DType::Complex128 || a == DType::Float64 || b == DType::Float64;
    return wide ? DType::Complex128 : DType::Complex64;
  }
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
    return DType::Float32;  // any other mix of float16, bfloat16, float32
  }
  // Both integral, not equal.
  const bool mixed_sign = (a == DType::UInt8) != (b == DType::UInt8);
  if (mixed_sign && (a == DType::Int8 || b == DType::Int8)) return DType::Int32;
  return element_size(a) >= element_size(b) ? a : b;
}

}  // namespace braid
